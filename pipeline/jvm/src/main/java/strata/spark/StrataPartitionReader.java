package strata.spark;

import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;

/**
 * Reads the files of one input partition through Hadoop's FileSystem (s3a for s3:// buckets, the local
 * filesystem for file://) and decodes them with {@link ChunkDecoder}: the rows of each file's chunks, in the
 * order of the task list.
 *
 * <p>IO: per file, only the chunk byte ranges are read, never the footer. Chunks closer than {@code mergeGap}
 * bytes are read together with one positioned read ({@code readFully(position, ...)}), up to {@link
 * #MAX_RANGE} bytes at a time, so a file whose chunks are all wanted costs one GET (s3a) besides the open.
 * One range's bytes are held at a time.
 *
 * <p>Errors: a decoding error is a {@link StrataReadException} with code 50002 that names the object, the
 * chunk's topic/partition and its position; a missing object (deleted by GC after its grace period: a read
 * must finish within it) is code 50004; a chunk past the end of its object is 50002, and so is a kept record
 * whose timestamp microseconds cannot hold, raised once its file is decoded (see {@link
 * ChunkDecoder#timestampError}). Other IO errors
 * (network, throttling) propagate as they are, for Spark to retry the task.
 *
 * <p>With {@code failOnDataLoss=false} (Spark's Kafka source option) a chunk that fails its checks is skipped
 * instead: the rows of its batches before the damage are kept, the rest of the chunk is not read, and a
 * warning names the range (topic/partition, the chunk's base offset, the object and byte); the read goes on.
 */
final class StrataPartitionReader implements PartitionReader<InternalRow> {
    /** Chunks at most this far apart are read with one request (the bytes between are read and dropped). */
    static final long MERGE_GAP = 1L << 20;
    /** The most bytes one read covers, unless a single chunk is larger. */
    static final long MAX_RANGE = 128L << 20;

    private final List<TaskList.FileTask> files;
    private final Configuration conf;
    private final int[] columns;
    private final long mergeGap;
    private final boolean failOnDataLoss;
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(StrataPartitionReader.class);

    private int fileIndex = -1;
    private TaskList.FileTask file;
    private FSDataInputStream stream;
    private int chunkIndex;
    private byte[] range; // bytes [rangeStart, rangeStart + range.length) of the current file
    private long rangeStart;
    private TaskList.Chunk chunkTask;
    private ChunkDecoder chunk;
    private String timestampError; // the current file's first, raised once the file is decoded
    private final ArrayList<InternalRow> rows = new ArrayList<>();
    private int rowIndex;
    private InternalRow current;

    /** Rows of {@code files} holding {@code columns} (see {@link ChunkDecoder}). */
    StrataPartitionReader(List<TaskList.FileTask> files, Configuration conf, int[] columns, long mergeGap,
            boolean failOnDataLoss) {
        this.files = files;
        this.conf = conf;
        this.columns = columns;
        this.mergeGap = mergeGap;
        this.failOnDataLoss = failOnDataLoss;
    }

    @Override
    public boolean next() throws IOException {
        while (rowIndex >= rows.size()) {
            rows.clear();
            rowIndex = 0;
            if (!decodeBatch()) {
                current = null;
                return false;
            }
        }
        current = rows.get(rowIndex++);
        return true;
    }

    @Override
    public InternalRow get() {
        return current;
    }

    @Override
    public void close() throws IOException {
        range = null;
        chunk = null;
        if (stream != null) {
            FSDataInputStream open = stream;
            stream = null;
            open.close();
        }
    }

    /** Decodes the next batch into {@code rows}; false once every file is done. */
    private boolean decodeBatch() throws IOException {
        while (chunk == null || !chunk.hasNextBatch()) {
            if (!nextChunk()) {
                return false;
            }
        }
        int at = chunk.position();
        try {
            chunk.nextBatch(rows);
        } catch (CodecException e) {
            String message = e.getMessage() + " (" + where(chunkTask) + ", batch at byte " + at + " of the chunk)";
            if (failOnDataLoss) {
                throw corrupt(message);
            }
            skipped(message);
            rows.clear();
            chunk = null;
        }
        return true;
    }

    private boolean nextChunk() throws IOException {
        if (chunk != null && timestampError == null) {
            timestampError = chunk.timestampError();
        }
        chunk = null;
        while (file == null || chunkIndex >= file.chunks.size()) {
            if (timestampError != null) {
                throw corrupt(timestampError + " (object " + file.objectKey + ")");
            }
            if (!nextFile()) {
                return false;
            }
        }
        TaskList.Chunk task = file.chunks.get(chunkIndex);
        if (range == null || task.endPosition() > rangeStart + range.length) {
            readRange(chunkIndex);
        }
        chunkIndex++;
        chunkTask = task;
        try {
            chunk = new ChunkDecoder(range, (int) (task.position - rangeStart), task, columns, file.objectKey);
        } catch (CodecException e) { // the chunk's CRC; the message names the object already
            String message = e.getMessage() + " (chunk " + task.topic + "/" + task.partition + " at byte "
                    + task.position + ")";
            if (failOnDataLoss) {
                throw corrupt(message);
            }
            skipped(message);
            chunk = null;
        }
        return true;
    }

    private boolean nextFile() throws IOException {
        close();
        fileIndex++;
        chunkIndex = 0;
        timestampError = null;
        if (fileIndex >= files.size()) {
            file = null;
            return false;
        }
        file = files.get(fileIndex);
        Path path = new Path(file.url);
        try {
            stream = path.getFileSystem(conf).open(path);
        } catch (FileNotFoundException e) {
            throw StrataReadException.notFound("object " + file.objectKey + " not found at " + file.url
                    + " (files replaced by compaction are deleted after the GC grace period: a read must "
                    + "finish within it)", file.objectKey, e);
        }
        return true;
    }

    /** Reads the chunks from {@code first} on that are close together, with one positioned read. */
    private void readRange(int first) throws IOException {
        List<TaskList.Chunk> chunks = file.chunks;
        long start = chunks.get(first).position;
        long end = chunks.get(first).endPosition();
        for (int i = first + 1; i < chunks.size(); i++) {
            TaskList.Chunk next = chunks.get(i);
            if (next.position - end > mergeGap || next.endPosition() - start > MAX_RANGE) {
                break;
            }
            end = next.endPosition();
        }
        range = null; // the previous range may go before the next is allocated
        byte[] bytes = new byte[(int) (end - start)];
        try {
            stream.readFully(start, bytes, 0, bytes.length);
        } catch (EOFException e) {
            throw corrupt("object " + file.objectKey + " ends before byte " + end
                    + ", where the chunks the metadata names end");
        }
        range = bytes;
        rangeStart = start;
    }

    private String where(TaskList.Chunk task) {
        return "object " + file.objectKey + ", chunk " + task.topic + "/" + task.partition + " at byte "
                + task.position;
    }

    /** failOnDataLoss=false: the damaged range is reported and skipped (the read goes on). */
    private void skipped(String message) {
        LOG.warn("skipping damaged data (failOnDataLoss=false): {}, from offset {} of {}/{}", message,
                chunkTask.baseOffset, chunkTask.topic, chunkTask.partition);
    }

    private StrataReadException corrupt(String message) {
        return StrataReadException.corrupt(message, file.objectKey);
    }
}
