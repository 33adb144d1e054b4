package strata.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * What a read covers, as the driver's metadata snapshot names it: the option {@code tasks} of the source,
 * written by {@code pipeline/tasklist.py}. UTF-8 text, lines ending in {@code \n}, fields separated by one tab:
 *
 * <pre>
 * strata-tasks 1
 * F  object key  object URL
 * C  topic  partition  base_offset  position  length  crc  start  end
 * C  ...
 * F  ...
 * </pre>
 *
 * The first line names the format and its version. Each {@code F} line starts a file: its key in the bucket
 * (what errors name) and the URL Hadoop opens ({@code s3a://bucket/prefix/key}, {@code file:///dir/key}),
 * taken verbatim, not percent-encoded. The {@code C} lines after it are that file's chunks to decode, by
 * increasing position: bytes [position, position + length) of the object, whose CRC-32C is crc (unsigned), whose
 * batches' offsets are relative to base_offset, and of whose records only offsets in [start, end) are kept.
 * Integers are decimal. No field holds a tab or a line break (topic names cannot; the driver refuses such URLs).
 */
final class TaskList {
    static final String HEADER = "strata-tasks 1";

    private TaskList() {}

    /** One chunk to decode: a line {@code C}. */
    static final class Chunk implements Serializable {
        private static final long serialVersionUID = 1L;

        final String topic;
        final int partition;
        final long baseOffset;
        final long position;
        final int length;
        final long crc;
        final long start;
        final long end;

        Chunk(String topic, int partition, long baseOffset, long position, int length, long crc, long start,
                long end) {
            this.topic = topic;
            this.partition = partition;
            this.baseOffset = baseOffset;
            this.position = position;
            this.length = length;
            this.crc = crc;
            this.start = start;
            this.end = end;
        }

        long endPosition() {
            return position + length;
        }
    }

    /** One object and its chunks, by position: a line {@code F} and the lines {@code C} after it. */
    static final class FileTask implements Serializable {
        private static final long serialVersionUID = 1L;

        final String objectKey;
        final String url;
        final List<Chunk> chunks;

        FileTask(String objectKey, String url, List<Chunk> chunks) {
            this.objectKey = objectKey;
            this.url = url;
            this.chunks = Collections.unmodifiableList(chunks);
        }

        /** Bytes of chunk data to read. */
        long bytes() {
            long total = 0;
            for (Chunk chunk : chunks) {
                total += chunk.length;
            }
            return total;
        }
    }

    /** The files of a task list; {@link StrataReadException} (internal) if the text is not one. */
    static List<FileTask> parse(String text) {
        if (text == null) {
            throw StrataReadException.internal("the Strata source needs the option 'tasks'");
        }
        String[] lines = text.split("\n", -1);
        int count = lines.length;
        if (count > 0 && lines[count - 1].isEmpty()) {
            count--; // the last line's end
        }
        if (count == 0 || !lines[0].equals(HEADER)) {
            throw StrataReadException.internal("task list does not start with '" + HEADER + "'");
        }
        List<FileTask> files = new ArrayList<>();
        String key = null;
        String url = null;
        List<Chunk> chunks = null;
        for (int i = 1; i < count; i++) {
            String[] fields = lines[i].split("\t", -1);
            int number = i + 1;
            if (fields[0].equals("F") && fields.length == 3) {
                if (key != null) {
                    files.add(file(key, url, chunks, number));
                }
                key = fields[1];
                url = fields[2];
                chunks = new ArrayList<>();
                if (key.isEmpty() || url.isEmpty()) {
                    throw bad(number, "a file needs a key and a URL");
                }
            } else if (fields[0].equals("C") && fields.length == 9) {
                if (chunks == null) {
                    throw bad(number, "a chunk before any file");
                }
                chunks.add(chunk(fields, number));
            } else {
                throw bad(number, "expected 'F' and 2 fields or 'C' and 8 fields, separated by tabs");
            }
        }
        if (key != null) {
            files.add(file(key, url, chunks, count));
        }
        return files;
    }

    private static FileTask file(String key, String url, List<Chunk> chunks, int number) {
        if (chunks.isEmpty()) {
            throw bad(number, "file " + key + " has no chunks");
        }
        for (int i = 1; i < chunks.size(); i++) {
            if (chunks.get(i).position < chunks.get(i - 1).endPosition()) {
                throw bad(number, "chunks of " + key + " overlap or are not by position");
            }
        }
        return new FileTask(key, url, chunks);
    }

    private static Chunk chunk(String[] f, int number) {
        String topic = f[1];
        long partition = number(f[2], number);
        long baseOffset = number(f[3], number);
        long position = number(f[4], number);
        long length = number(f[5], number);
        long crc = number(f[6], number);
        long start = number(f[7], number);
        long end = number(f[8], number);
        if (topic.isEmpty() || partition > Integer.MAX_VALUE || position > Long.MAX_VALUE - length
                || crc > 0xffffffffL || start > end) {
            throw bad(number, "chunk values out of range");
        }
        if (length < 1 || length > Compression.MAX_ARRAY) {
            throw bad(number, "chunk of " + length + " bytes: the JVM reader takes 1 to " + Compression.MAX_ARRAY);
        }
        return new Chunk(topic, (int) partition, baseOffset, position, (int) length, crc, start, end);
    }

    private static long number(String field, int line) {
        if (field.isEmpty() || field.length() > 19) {
            throw bad(line, "'" + field + "' is not a number >= 0");
        }
        for (int i = 0; i < field.length(); i++) {
            char c = field.charAt(i);
            if (c < '0' || c > '9') {
                throw bad(line, "'" + field + "' is not a number >= 0");
            }
        }
        try {
            return Long.parseLong(field);
        } catch (NumberFormatException e) {
            throw bad(line, "'" + field + "' does not fit in 63 bits");
        }
    }

    private static StrataReadException bad(int line, String why) {
        return StrataReadException.internal("task list line " + line + ": " + why);
    }
}
