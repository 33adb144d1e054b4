package strata.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * What a read covers, as the driver's metadata snapshot names it: the option {@code tasks} of the source,
 * written by {@code pipeline/tasklist.py}. UTF-8 text, lines ending in {@code \n}, fields separated by one tab:
 *
 * <pre>
 * strata-tasks 2
 * F  object key  object URL
 * C  topic  partition  base_offset  position  length  crc  start  end
 * X  producer_id  first  last
 * X  ...
 * C  ...
 * F  ...
 * </pre>
 *
 * The first line names the format and its version. Each {@code F} line starts a file: its key in the bucket
 * (what errors name) and the URL Hadoop opens ({@code s3a://bucket/prefix/key}, {@code file:///dir/key}),
 * taken verbatim, not percent-encoded. The {@code C} lines after it are that file's chunks to decode, by
 * increasing position: bytes [position, position + length) of the object, whose CRC-32C is crc (unsigned), whose
 * batches' offsets are relative to base_offset, and of whose records only offsets in [start, end) are kept.
 * The {@code X} lines after a {@code C} line, none or more, are that chunk's aborted transactions (a
 * read_committed read): every transactional batch (attributes bit 4) whose producer id is producer_id and whose
 * absolute base offset lies in [first, last] (last: the ABORT marker's offset) is dropped. Integers are decimal,
 * none negative. No field holds a tab or a line break (topic names cannot; the driver refuses such URLs).
 * Version 2 added the {@code X} lines; a list of another version is refused at its first line.
 */
final class TaskList {
    static final String HEADER = "strata-tasks 2";
    private static final long[] NO_RANGES = new long[0];

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
        /** The aborted transactions' ranges, lines {@code X}: (producer id, first, last) after one another. */
        private final long[] aborted;

        Chunk(String topic, int partition, long baseOffset, long position, int length, long crc, long start,
                long end, long[] aborted) {
            this.topic = topic;
            this.partition = partition;
            this.baseOffset = baseOffset;
            this.position = position;
            this.length = length;
            this.crc = crc;
            this.start = start;
            this.end = end;
            this.aborted = aborted;
        }

        Chunk withAborted(long[] ranges) {
            return new Chunk(topic, partition, baseOffset, position, length, crc, start, end, ranges);
        }

        long endPosition() {
            return position + length;
        }

        /**
         * Whether a transactional batch of {@code producerId} whose baseOffset (relative to the chunk) is
         * {@code batchBaseOffset} belongs to one of the chunk's aborted transactions: its absolute base offset
         * lies in that transaction's [first, last]. The rule of {@code pipeline/decode.py} (Kafka's consumer's).
         */
        boolean abortedBatch(long producerId, long batchBaseOffset) {
            if (aborted.length == 0) {
                return false;
            }
            long base;
            try {
                base = Math.addExact(baseOffset, batchBaseOffset);
            } catch (ArithmeticException e) {
                return false; // past 2^63 - 1, so past every range
            }
            for (int i = 0; i < aborted.length; i += 3) {
                if (aborted[i] == producerId && aborted[i + 1] <= base && base <= aborted[i + 2]) {
                    return true;
                }
            }
            return false;
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
        Parser parser = new Parser();
        for (int i = 1; i < count; i++) {
            parser.line(lines[i].split("\t", -1), i + 1);
        }
        parser.endFile(count);
        return parser.files;
    }

    /** The lines after the header, one at a time: a chunk is complete at the next line that is no X. */
    private static final class Parser {
        final List<FileTask> files = new ArrayList<>();
        private String key;
        private String url;
        private List<Chunk> chunks;
        private Chunk chunk; // the last C line's, until the lines X after it are read
        private long[] aborted = new long[0];
        private int abortedLength;

        void line(String[] fields, int number) {
            if (fields[0].equals("X") && fields.length == 4) {
                if (chunk == null) {
                    throw bad(number, "an aborted range before any chunk");
                }
                long first = number(fields[2], number);
                long last = number(fields[3], number);
                if (first > last) {
                    throw bad(number, "an aborted range must not end before it starts");
                }
                if (abortedLength + 3 > aborted.length) {
                    aborted = Arrays.copyOf(aborted, Math.max(12, 2 * aborted.length));
                }
                aborted[abortedLength++] = number(fields[1], number);
                aborted[abortedLength++] = first;
                aborted[abortedLength++] = last;
                return;
            }
            endChunk();
            if (fields[0].equals("F") && fields.length == 3) {
                endFile(number);
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
                chunk = chunk(fields, number, NO_RANGES);
            } else {
                throw bad(number,
                        "expected 'F' and 2 fields, 'C' and 8 fields or 'X' and 3 fields, separated by tabs");
            }
        }

        private void endChunk() {
            if (chunk != null) {
                chunks.add(abortedLength == 0 ? chunk : chunk.withAborted(Arrays.copyOf(aborted, abortedLength)));
                chunk = null;
                abortedLength = 0;
            }
        }

        void endFile(int number) {
            endChunk();
            if (key != null) {
                files.add(file(key, url, chunks, number));
            }
        }
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

    private static Chunk chunk(String[] f, int number, long[] aborted) {
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
        return new Chunk(topic, (int) partition, baseOffset, position, (int) length, crc, start, end, aborted);
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
