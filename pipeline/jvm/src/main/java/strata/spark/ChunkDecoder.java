package strata.spark;

import java.math.BigInteger;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32C;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One chunk of a Strata file turned into rows with the Kafka source's columns. Sans-IO: bytes in, rows out.
 * The JVM twin of {@code pipeline/decode.py} over the reference decoder of {@code storage/records/codec.py}:
 * the same rows for the same bytes, and for bad bytes a {@link CodecException} with the same message.
 *
 * <p>A Strata file ({@code storage/fileformat.py}) is its chunks back to back, then a footer and a trailer,
 * which this reader never reads: the driver's metadata snapshot already names, per chunk, its byte range, its
 * CRC-32C, its absolute base offset and the offsets to keep ({@link TaskList.Chunk}).
 *
 * <pre>
 * +---------------+---------------+-----+-----------------+--------+---------------+
 * | chunk 0 bytes | chunk 1 bytes | ... | chunk n-1 bytes | footer | trailer (16 B) |
 * +---------------+---------------+-----+-----------------+--------+---------------+
 * </pre>
 *
 * A chunk is one topic-partition's Kafka RecordBatch v2 batches, concatenated; its CRC-32C (Castagnoli) covers
 * all its bytes and is checked before anything else. Every integer is big-endian; {@code varint} and {@code
 * varlong} are zigzag base-128 varints of at most 5 and 10 bytes.
 *
 * <pre>
 * offset  size  field
 * ------  ----  ------------------------------------------------------------------------
 *      0     8  baseOffset            int64   relative to the chunk: the first batch starts at 0
 *      8     4  batchLength           int32   bytes after this field: the batch is 12 + batchLength
 *     12     4  partitionLeaderEpoch  int32   (ignored)
 *     16     1  magic                 int8    always 2
 *     17     4  crc                   uint32  CRC-32C of bytes 21 .. end of batch
 *     21     2  attributes            int16   bits 0-2 codec, bit 3 LogAppendTime, bit 4 transactional,
 *                                              bit 5 control
 *     23     4  lastOffsetDelta       int32
 *     27     8  baseTimestamp         int64
 *     35     8  maxTimestamp          int64
 *     43     8  producerId            int64   (read for transactional batches only)
 *     51     2  producerEpoch         int16   (ignored)
 *     53     4  baseSequence          int32   (ignored)
 *     57     4  recordsCount          int32
 *     61     .  records               [Record], compressed as a whole when bits 0-2 are not 0
 *
 * Record: length varint, attributes int8 (ignored), timestampDelta varlong, offsetDelta varint,
 *         keyLength varint (-1 = null), key, valueLength varint (-1 = null: a tombstone), value,
 *         headerCount varint, headers [keyLength varint, key utf-8, valueLength varint (-1 = null), value]
 * </pre>
 *
 * What each row takes: offset = the chunk's base offset (from the snapshot) + baseOffset + offsetDelta, kept
 * only in the chunk's [start, end) (offsets compaction removed simply have no record: holes need nothing);
 * timestamp = baseTimestamp + timestampDelta (CreateTime, timestampType 0), or maxTimestamp for every record
 * of a LogAppendTime batch (timestampType 1), in microseconds; key, value and header values null for length
 * -1; headers an empty array when there are none. A transactional batch of one of the chunk's aborted
 * transactions ({@link TaskList.Chunk#abortedBatch}: its producerId, and its absolute base offset in that
 * transaction's range) is dropped once its header checks pass, before its records are read: damage in its
 * header or CRC still fails the read, as in Python. Other transactional batches are read like any other; control
 * batches are refused, as Strata never stores them.
 *
 * <p>Checks, in the reference's order and with its messages: the chunk CRC; per batch the header (room, magic,
 * length, truncation), the batch CRC, the codec, the control flag, recordsCount against the room its records
 * could take, lastOffsetDelta; then the records section is decompressed (bounded, {@link Compression}) and
 * every record is checked (lengths inside the record and the batch, strictly increasing offset deltas up to
 * lastOffsetDelta, valid varints, header keys valid UTF-8, nothing left over), whether or not its offset is
 * kept. Only a kept record's timestamp must fit in microseconds: one that does not fails the file, but only
 * once the whole file is decoded, as in Python, where the Arrow column overflows ({@link #timestampError}).
 * A batch is decoded whole before any of its rows is handed out.
 */
final class ChunkDecoder {
    static final int RECORD_BATCH_OVERHEAD = 61;
    static final int LOG_OVERHEAD = 12;
    private static final int MAGIC = 2;
    private static final int CRC_START = 21;
    private static final int COMPRESSION_MASK = 0x07;
    private static final int LOG_APPEND_TIME = 0x08;
    private static final int TRANSACTIONAL = 0x10;
    private static final int CONTROL = 0x20;
    /** Seven one-byte fields: the smallest record. Bounds recordsCount before any record is read. */
    private static final int MIN_RECORD_SIZE = 7;

    private static final ArrayData NO_HEADERS = new GenericArrayData(new Object[0]);

    private final byte[] buf;
    private final int start; // the chunk is buf[start, start + length)
    private final int length;
    private final TaskList.Chunk task;
    private final int[] columns; // the schema's columns each row holds, in order (StrataSource.KEY, ...)
    private final UTF8String topic;
    private final Integer partition;
    private int pos; // the next batch, relative to the chunk
    private int[] headerSpans = new int[16]; // (key start, key length, value start, value length) per header
    private String timestampError; // the first kept record whose timestamp microseconds cannot hold

    /**
     * A decoder of the chunk {@code buf[start, start + task.length)}, whose CRC-32C is checked first. Its rows
     * hold {@code columns} (indexes into the full schema, {@link StrataSource#KEY} and on): every record is
     * decoded and checked alike, only what is built of it differs.
     */
    ChunkDecoder(byte[] buf, int start, TaskList.Chunk task, int[] columns, String objectKey)
            throws CodecException {
        this.buf = buf;
        this.start = start;
        this.length = task.length;
        this.task = task;
        this.columns = columns;
        this.topic = UTF8String.fromString(task.topic);
        this.partition = task.partition;
        long actual = crc32c(buf, start, length);
        if (actual != task.crc) {
            String where = objectKey.isEmpty() ? "" : " in " + objectKey;
            throw new CodecException(String.format(
                    "chunk%s fails its CRC-32C check (stored 0x%08x, computed 0x%08x)", where, task.crc, actual));
        }
    }

    static long crc32c(byte[] b, int off, int len) {
        CRC32C crc = new CRC32C();
        crc.update(b, off, len);
        return crc.getValue();
    }

    boolean hasNextBatch() {
        return pos < length;
    }

    /**
     * Why a kept record was left out: its timestamp does not fit in microseconds; null if none was. The
     * Python decoder fails on it only once its whole file is decoded (building the Arrow column), after any
     * decoding error in a later chunk: the reader does the same with this.
     */
    String timestampError() {
        return timestampError;
    }

    /** Where the next batch starts, relative to the chunk. */
    int position() {
        return pos;
    }

    /**
     * Decodes the next batch and appends its rows with offsets in [start, end) to {@code out}: none for a batch
     * of an aborted transaction.
     */
    void nextBatch(List<InternalRow> out) throws CodecException {
        int at = pos;
        int p = start + at;
        int remaining = length - at;
        if (remaining < RECORD_BATCH_OVERHEAD) {
            throw new CodecException(
                    remaining + " trailing bytes at position " + at + " are shorter than a record batch header");
        }
        long baseOffset = i64(buf, p);
        int batchLength = i32(buf, p + 8);
        byte magic = buf[p + 16];
        long crc = i32(buf, p + 17) & 0xffffffffL;
        short attributes = (short) ((buf[p + 21] & 0xff) << 8 | (buf[p + 22] & 0xff));
        int lastOffsetDelta = i32(buf, p + 23);
        long baseTimestamp = i64(buf, p + 27);
        long maxTimestamp = i64(buf, p + 35);
        int recordsCount = i32(buf, p + 57);
        if (magic != MAGIC) {
            throw new CodecException("record batch at position " + at + " has magic " + magic + ", expected 2");
        }
        long size = LOG_OVERHEAD + (long) batchLength;
        if (size < RECORD_BATCH_OVERHEAD) {
            throw new CodecException(
                    "record batch at position " + at + " declares length " + batchLength + ", below the minimum");
        }
        if (size > remaining) {
            throw new CodecException("record batch at position " + at + " declares " + size + " bytes but only "
                    + remaining + " remain (truncated)");
        }
        int batchSize = (int) size;
        if (crc32c(buf, p + CRC_START, batchSize - CRC_START) != crc) {
            throw new CodecException("record batch at position " + at + " fails its CRC-32C check");
        }
        int codec = attributes & COMPRESSION_MASK;
        long recordsRoom = size - RECORD_BATCH_OVERHEAD;
        if (codec != Compression.NONE) {
            if (codec > Compression.ZSTD) {
                throw new CodecException(
                        "record batch at position " + at + " uses unknown compression codec " + codec);
            }
            recordsRoom = Compression.outputLimit(recordsRoom);
        }
        if ((attributes & CONTROL) != 0) {
            throw new CodecException("record batch at position " + at
                    + " is a control batch, which Strata does not support");
        }
        if (recordsCount < 0 || (long) recordsCount * MIN_RECORD_SIZE > recordsRoom) {
            throw new CodecException(
                    "record batch at position " + at + " declares an impossible record count " + recordsCount);
        }
        if (lastOffsetDelta < 0 || (recordsCount != 0 && lastOffsetDelta < recordsCount - 1)) {
            throw new CodecException("record batch at position " + at + " has lastOffsetDelta " + lastOffsetDelta
                    + " for " + recordsCount + " records");
        }
        pos += batchSize;
        if ((attributes & TRANSACTIONAL) != 0 && task.abortedBatch(i64(buf, p + 43), baseOffset)) {
            return; // an aborted transaction's batch (read_committed): none of its records is read
        }

        Cursor records;
        if (codec == Compression.NONE) {
            records = new Cursor(buf, p + RECORD_BATCH_OVERHEAD, p + batchSize);
        } else {
            int stored = batchSize - RECORD_BATCH_OVERHEAD;
            Compression.Output expanded = Compression.decompress(
                    codec, buf, p + RECORD_BATCH_OVERHEAD, stored, Compression.outputLimit(stored));
            if ((long) recordsCount * MIN_RECORD_SIZE > expanded.size) {
                throw new CodecException("compressed record batch declares " + recordsCount
                        + " records but holds only " + expanded.size + " bytes of records");
            }
            records = new Cursor(expanded.buf, 0, expanded.size);
        }
        boolean logAppendTime = (attributes & LOG_APPEND_TIME) != 0;
        decodeRecords(records, recordsCount, baseOffset, lastOffsetDelta, baseTimestamp,
                logAppendTime ? maxTimestamp : null, out);
    }

    private void decodeRecords(Cursor c, int recordsCount, long batchBaseOffset, int lastOffsetDelta,
            long baseTimestamp, Long appendTime, List<InternalRow> out) throws CodecException {
        // The first offset in 64 bits, or none: an offset past 2^63 - 1 is past every range's end.
        boolean beyond = false;
        long firstOffset = 0;
        try {
            firstOffset = Math.addExact(task.baseOffset, batchBaseOffset);
        } catch (ArithmeticException e) {
            beyond = true;
        }
        Integer timestampType = appendTime == null ? 0 : 1;
        byte[] b = c.buf;
        int end = c.end;
        long previousDelta = -1;
        for (int i = 0; i < recordsCount; i++) {
            if (c.pos >= end) {
                throw new CodecException("record batch holds fewer records than its recordsCount");
            }
            long recordLength = c.varint(32);
            long recordEnd = c.pos + recordLength;
            if (recordEnd > end || recordEnd - c.pos < MIN_RECORD_SIZE - 1) {
                throw new CodecException("record length runs past its batch or is too small");
            }
            c.pos += 1; // record attributes: unused by Kafka, ignored on read
            long timestampDelta = c.varint(64);
            long offsetDelta = c.varint(32);
            if (offsetDelta <= previousDelta || offsetDelta > lastOffsetDelta) {
                throw new CodecException(
                        "offset delta " + offsetDelta + " is out of order or past lastOffsetDelta");
            }
            previousDelta = offsetDelta;
            long keyLength = c.varint(32);
            int keyStart = c.pos;
            if (keyLength >= 0) {
                if (c.pos + keyLength > recordEnd) {
                    throw new CodecException("record key runs past its record");
                }
                c.pos += (int) keyLength;
            } else if (keyLength != -1) {
                throw new CodecException("record key length " + keyLength + " is invalid");
            }
            long valueLength = c.varint(32);
            int valueStart = c.pos;
            if (valueLength >= 0) {
                if (c.pos + valueLength > recordEnd) {
                    throw new CodecException("record value runs past its record");
                }
                c.pos += (int) valueLength;
            } else if (valueLength != -1) {
                throw new CodecException("record value length " + valueLength + " is invalid");
            }
            int first = c.readByte();
            int headerCount = 0;
            if (first != 0) {
                headerCount = decodeHeaders(c, recordEnd, c.varintAfter(first, 32));
            }
            if (c.pos != recordEnd) {
                throw new CodecException("record length does not match its fields");
            }
            if (beyond || firstOffset > Long.MAX_VALUE - offsetDelta) {
                continue; // past 2^63 - 1, so past the end of any range
            }
            long offset = firstOffset + offsetDelta;
            if (offset < task.start || offset >= task.end) {
                continue;
            }
            long micros;
            try {
                long millis = appendTime != null ? appendTime : Math.addExact(baseTimestamp, timestampDelta);
                micros = Math.multiplyExact(millis, 1000L);
            } catch (ArithmeticException e) {
                if (timestampError == null) {
                    BigInteger millis = BigInteger.valueOf(appendTime != null ? appendTime : baseTimestamp)
                            .add(BigInteger.valueOf(appendTime != null ? 0 : timestampDelta));
                    timestampError = "record at offset " + offset + " has timestamp " + millis
                            + " ms, outside what a timestamp column holds (64-bit microseconds)";
                }
                continue;
            }
            Object[] values = new Object[columns.length];
            for (int k = 0; k < columns.length; k++) {
                switch (columns[k]) {
                    case StrataSource.KEY:
                        values[k] = keyLength < 0 ? null : Arrays.copyOfRange(b, keyStart, keyStart + (int) keyLength);
                        break;
                    case StrataSource.VALUE:
                        values[k] = valueLength < 0 ? null
                                : Arrays.copyOfRange(b, valueStart, valueStart + (int) valueLength);
                        break;
                    case StrataSource.TOPIC:
                        values[k] = topic;
                        break;
                    case StrataSource.PARTITION:
                        values[k] = partition;
                        break;
                    case StrataSource.OFFSET:
                        values[k] = offset;
                        break;
                    case StrataSource.TIMESTAMP:
                        values[k] = micros;
                        break;
                    case StrataSource.TIMESTAMP_TYPE:
                        values[k] = timestampType;
                        break;
                    default: // StrataSource.HEADERS
                        values[k] = headerCount == 0 ? NO_HEADERS : headers(b, headerCount);
                }
            }
            out.add(new GenericInternalRow(values));
        }
        if (c.pos != end) {
            throw new CodecException("record batch has bytes left after its recordsCount records");
        }
    }

    /** Checks {@code count} headers ending by {@code recordEnd}; their spans go to headerSpans. */
    private int decodeHeaders(Cursor c, long recordEnd, long count) throws CodecException {
        if (count < 0 || count * 2 > recordEnd - c.pos) {
            throw new CodecException("record declares an impossible header count " + count);
        }
        int n = (int) count;
        if (headerSpans.length < 4 * n) {
            headerSpans = new int[Math.max(4 * n, 2 * headerSpans.length)];
        }
        for (int h = 0; h < n; h++) {
            long keyLength = c.varint(32);
            if (keyLength < 0 || c.pos + keyLength > recordEnd) {
                throw new CodecException("record header key length " + keyLength + " is invalid");
            }
            if (!Utf8.isValid(c.buf, c.pos, (int) keyLength)) {
                throw new CodecException("record header key is not valid utf-8");
            }
            headerSpans[4 * h] = c.pos;
            headerSpans[4 * h + 1] = (int) keyLength;
            c.pos += (int) keyLength;
            long valueLength = c.varint(32);
            if (valueLength < 0) {
                if (valueLength != -1) {
                    throw new CodecException("record header value length " + valueLength + " is invalid");
                }
                headerSpans[4 * h + 2] = c.pos;
                headerSpans[4 * h + 3] = -1;
                continue;
            }
            if (c.pos + valueLength > recordEnd) {
                throw new CodecException("record header value length " + valueLength + " runs past the record");
            }
            headerSpans[4 * h + 2] = c.pos;
            headerSpans[4 * h + 3] = (int) valueLength;
            c.pos += (int) valueLength;
        }
        return n;
    }

    private ArrayData headers(byte[] b, int count) {
        Object[] headers = new Object[count];
        for (int h = 0; h < count; h++) {
            int keyStart = headerSpans[4 * h];
            int valueStart = headerSpans[4 * h + 2];
            int valueLength = headerSpans[4 * h + 3];
            headers[h] = new GenericInternalRow(new Object[] {
                UTF8String.fromBytes(Arrays.copyOfRange(b, keyStart, keyStart + headerSpans[4 * h + 1])),
                valueLength < 0 ? null : Arrays.copyOfRange(b, valueStart, valueStart + valueLength),
            });
        }
        return new GenericArrayData(headers);
    }

    static long i64(byte[] b, int p) {
        return (long) i32(b, p) << 32 | (i32(b, p + 4) & 0xffffffffL);
    }

    static int i32(byte[] b, int p) {
        return (b[p] & 0xff) << 24 | (b[p + 1] & 0xff) << 16 | (b[p + 2] & 0xff) << 8 | (b[p + 3] & 0xff);
    }

    /** A read position in one batch's records, {@code buf[pos, end)}: no read goes past {@code end}. */
    static final class Cursor {
        final byte[] buf;
        final int end;
        int pos;

        Cursor(byte[] buf, int pos, int end) {
            this.buf = buf;
            this.pos = pos;
            this.end = end;
        }

        int readByte() throws CodecException {
            if (pos >= end) {
                throw new CodecException("record runs past the end of the buffer");
            }
            return buf[pos++] & 0xff;
        }

        /** A zigzag varint of at most {@code maxBits} (32 or 64) bits, decoded to its signed value. */
        long varint(int maxBits) throws CodecException {
            return varintAfter(readByte(), maxBits);
        }

        /** {@link #varint} whose first byte was already read. */
        long varintAfter(int first, int maxBits) throws CodecException {
            long n;
            if (first < 0x80) {
                n = first;
            } else {
                // As the reference: "longer" if a continuation bit is set once maxBits are read, "overflows"
                // if the last byte carries bits past maxBits. Bits 0-63 of the unsigned value live in n.
                n = first & 0x7f;
                int shift = 7;
                boolean overflow = false;
                while (true) {
                    int next = readByte();
                    long part = next & 0x7f;
                    if (shift == 63) { // only maxBits 64 gets here; bits 64 and up are lost below
                        overflow = part > 1;
                    }
                    n |= part << shift;
                    if (next < 0x80) {
                        break;
                    }
                    shift += 7;
                    if (shift >= maxBits) {
                        throw new CodecException("varint longer than " + maxBits + " bits");
                    }
                }
                if (maxBits == 64 ? overflow : (n >>> 32) != 0) {
                    throw new CodecException("varint overflows " + maxBits + " bits");
                }
            }
            return (n >>> 1) ^ -(n & 1);
        }
    }

    /** Well-formed UTF-8 (Unicode Table 3-7), what Python's strict {@code bytes.decode("utf-8")} accepts. */
    static final class Utf8 {
        private Utf8() {}

        static boolean isValid(byte[] b, int off, int len) {
            int i = off;
            int end = off + len;
            while (i < end) {
                int c = b[i] & 0xff;
                if (c < 0x80) {
                    i++;
                    continue;
                }
                int n;
                int lo = 0x80;
                int hi = 0xbf;
                if (c >= 0xc2 && c <= 0xdf) {
                    n = 1;
                } else if (c >= 0xe0 && c <= 0xef) {
                    n = 2;
                    if (c == 0xe0) {
                        lo = 0xa0;
                    } else if (c == 0xed) {
                        hi = 0x9f;
                    }
                } else if (c >= 0xf0 && c <= 0xf4) {
                    n = 3;
                    if (c == 0xf0) {
                        lo = 0x90;
                    } else if (c == 0xf4) {
                        hi = 0x8f;
                    }
                } else {
                    return false;
                }
                if (i + n >= end) {
                    return false; // truncated sequence
                }
                int second = b[i + 1] & 0xff;
                if (second < lo || second > hi) {
                    return false;
                }
                for (int k = 2; k <= n; k++) {
                    int cont = b[i + k] & 0xff;
                    if (cont < 0x80 || cont > 0xbf) {
                        return false;
                    }
                }
                i += n + 1;
            }
            return true;
        }
    }
}
