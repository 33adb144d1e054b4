package strata.spark;

import com.github.luben.zstd.ZstdException;
import com.github.luben.zstd.ZstdInputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;
import net.jpountz.lz4.LZ4FrameInputStream;
import org.xerial.snappy.Snappy;
import org.xerial.snappy.SnappyError;

/**
 * Kafka's four record-batch codecs, sans-IO and bounded: the JVM twin of {@code storage/records/compression.py}.
 *
 * <p>A batch's codec is {@code attributes & 0x07}: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (5-7 are refused by
 * {@link ChunkDecoder}). Only a batch's records section is compressed. The streams, as Kafka's clients write
 * them:
 *
 * <ul>
 *   <li><b>gzip</b> (1): gzip members (RFC 1952), one or several concatenated. Read with {@link Inflater} in raw
 *       mode and the member header and trailer parsed here, as zlib does for Python: {@code GZIPInputStream}
 *       would silently ignore trailing garbage that zlib refuses.
 *       <pre>
 *   offset  size  field
 *        0     2  magic      0x1f 0x8b
 *        2     1  method     8 (deflate)
 *        3     1  flags      bit 1 FHCRC, bit 2 FEXTRA, bit 3 FNAME, bit 4 FCOMMENT; bits 5-7 must be 0
 *        4     6  mtime (4), xfl (1), os (1)
 *       10     .  [FEXTRA: xlen u16 little-endian, xlen bytes] [FNAME: bytes, 0] [FCOMMENT: bytes, 0]
 *                 [FHCRC: u16 little-endian, the low 16 bits of the CRC-32 of the header so far]
 *        .     .  deflate stream (RFC 1951)
 *        .     8  CRC-32 of the member's output (u32 LE), its size mod 2^32 (u32 LE)</pre>
 *   <li><b>snappy</b> (2): raw snappy (librdkafka: a varint of the uncompressed length, then the stream), or
 *       the xerial framing (Java clients, and Strata): the 8-byte magic {@code 82 'SNAPPY' 00}, version and
 *       compatible (int32 BE each, not checked), then blocks of [length int32 BE, raw snappy block]. Told apart
 *       by the magic, which no raw stream starts with.
 *   <li><b>lz4</b> (3): the LZ4 frame format (KIP-57), read with lz4-java's {@link LZ4FrameInputStream}.
 *   <li><b>zstd</b> (4): zstd frames, with or without a frame content size (streaming writers leave it out),
 *       read with zstd-jni's {@link ZstdInputStream}.
 * </ul>
 *
 * <p>Decompression is bounded by {@link #outputLimit}, the same bound as Python's
 * {@code compression.output_limit}: the larger of 64 MiB and 16 times the compressed size. A stream that
 * would produce more fails with a {@link CodecException} once {@code limit + 1} bytes exist (snappy: before
 * anything is allocated, from the length its block declares), so a decompression bomb costs at most the
 * limit, never an out-of-memory. The JVM adds one bound of its own: an array holds at most
 * {@link #MAX_ARRAY} bytes, which only a batch compressed to more than 128 MiB could reach.
 *
 * <p>Every malformed stream raises {@link CodecException} and nothing else, with Python's wording: "{@code
 * <codec> data is corrupt: <detail>}", "{@code gzip data is truncated}", "{@code <codec> data decompresses to
 * more than <limit> bytes (a decompression bomb?)}". The detail comes from the library and differs from
 * Python's.
 */
final class Compression {
    static final int NONE = 0;
    static final int GZIP = 1;
    static final int SNAPPY = 2;
    static final int LZ4 = 3;
    static final int ZSTD = 4;

    static final long OUTPUT_LIMIT_FLOOR = 64L << 20;
    static final long OUTPUT_LIMIT_RATIO = 16;
    /** The largest byte[] every JVM allocates. */
    static final int MAX_ARRAY = Integer.MAX_VALUE - 8;

    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final int XERIAL_HEADER_SIZE = 16;
    private static final int GZIP_STEP = 4 << 20;
    private static final int FIRST_CAPACITY = 64 << 10;

    private Compression() {}

    /** The most bytes a records section of {@code compressedSize} bytes may decompress to. */
    static long outputLimit(long compressedSize) {
        return Math.max(OUTPUT_LIMIT_FLOOR, OUTPUT_LIMIT_RATIO * compressedSize);
    }

    static String name(int codec) {
        switch (codec) {
            case GZIP:
                return "gzip";
            case SNAPPY:
                return "snappy";
            case LZ4:
                return "lz4";
            case ZSTD:
                return "zstd";
            default:
                return "codec " + codec;
        }
    }

    /** Decompressed bytes: {@code buf[0, size)}. */
    static final class Output {
        byte[] buf;
        int size;
        private final long bound; // limit + 1, within MAX_ARRAY

        Output(long limit, int expected) {
            this.bound = Math.min(limit + 1, MAX_ARRAY);
            this.buf = new byte[(int) Math.min(bound, Math.max(FIRST_CAPACITY, (long) expected))];
        }

        /** Room for {@code n} more bytes (n <= bound - size). */
        void reserve(int n) {
            long needed = (long) size + n;
            if (needed <= buf.length) {
                return;
            }
            long capacity = Math.min(bound, Math.max(needed, 2L * buf.length));
            buf = java.util.Arrays.copyOf(buf, (int) capacity);
        }

        /** Bytes that may still be written before the bound: at least 1 while size <= limit. */
        long room() {
            return bound - size;
        }
    }

    /** The records section {@code in[off, off+len)} decompressed, at most {@code limit} bytes of it. */
    static Output decompress(int codec, byte[] in, int off, int len, long limit) throws CodecException {
        switch (codec) {
            case GZIP:
                return gunzip(in, off, len, limit);
            case SNAPPY:
                return unsnappy(in, off, len, limit);
            case LZ4:
                return unlz4(in, off, len, limit);
            case ZSTD:
                return unzstd(in, off, len, limit);
            default:
                throw new CodecException("unknown compression codec " + codec);
        }
    }

    private static long effectiveLimit(long limit) {
        return Math.min(limit, MAX_ARRAY - 1L);
    }

    private static CodecException tooLarge(String name, long limit) {
        return new CodecException(
                name + " data decompresses to more than " + limit + " bytes (a decompression bomb?)");
    }

    // --- gzip -------------------------------------------------------------------------------------------

    private static Output gunzip(byte[] in, int off, int len, long requested) throws CodecException {
        long limit = effectiveLimit(requested);
        Output out = new Output(limit, 4 * len);
        int pos = off;
        int end = off + len;
        do { // one member per round, as Python's loop over unused_data
            pos = gzipHeader(in, pos, end);
            Inflater inflater = new Inflater(true);
            try {
                inflater.setInput(in, pos, end - pos);
                CRC32 crc = new CRC32();
                int memberStart = out.size;
                while (!inflater.finished()) {
                    // Bounded steps, as Python's max_length: a bomb stops at limit + 1 bytes.
                    int step = (int) Math.min(GZIP_STEP, out.room());
                    out.reserve(step);
                    int before = inflater.getRemaining();
                    int n;
                    try {
                        n = inflater.inflate(out.buf, out.size, step);
                    } catch (DataFormatException e) {
                        throw new CodecException("gzip data is corrupt: " + e.getMessage());
                    }
                    crc.update(out.buf, out.size, n);
                    out.size += n;
                    if (out.size > limit) {
                        throw tooLarge("gzip", limit);
                    }
                    if (n == 0 && !inflater.finished()) {
                        if (inflater.needsDictionary()) {
                            throw new CodecException("gzip data is corrupt: a preset dictionary is not allowed");
                        }
                        if (inflater.needsInput() || inflater.getRemaining() == before) {
                            throw new CodecException("gzip data is truncated");
                        }
                    }
                }
                pos = end - inflater.getRemaining();
                if (end - pos < 8) {
                    throw new CodecException("gzip data is truncated");
                }
                if (le32(in, pos) != crc.getValue()) {
                    throw new CodecException("gzip data is corrupt: incorrect data check");
                }
                if (le32(in, pos + 4) != ((out.size - memberStart) & 0xffffffffL)) {
                    throw new CodecException("gzip data is corrupt: incorrect length check");
                }
                pos += 8;
            } finally {
                inflater.end();
            }
        } while (pos < end);
        return out;
    }

    /** Where the deflate stream of the member whose header starts at {@code pos} begins. */
    private static int gzipHeader(byte[] in, int pos, int end) throws CodecException {
        int start = pos;
        need(pos, 2, end);
        if ((in[pos] & 0xff) != 0x1f || (in[pos + 1] & 0xff) != 0x8b) {
            throw new CodecException("gzip data is corrupt: incorrect header check");
        }
        need(pos, 10, end);
        if (in[pos + 2] != 8) {
            throw new CodecException("gzip data is corrupt: unknown compression method");
        }
        int flags = in[pos + 3] & 0xff;
        if ((flags & 0xe0) != 0) {
            throw new CodecException("gzip data is corrupt: unknown header flags set");
        }
        pos += 10;
        if ((flags & 0x04) != 0) { // FEXTRA
            need(pos, 2, end);
            int xlen = (in[pos] & 0xff) | (in[pos + 1] & 0xff) << 8;
            pos += 2;
            need(pos, xlen, end);
            pos += xlen;
        }
        for (int bit : new int[] {0x08, 0x10}) { // FNAME, FCOMMENT: zero-terminated
            if ((flags & bit) != 0) {
                while (true) {
                    need(pos, 1, end);
                    if (in[pos++] == 0) {
                        break;
                    }
                }
            }
        }
        if ((flags & 0x02) != 0) { // FHCRC
            need(pos, 2, end);
            CRC32 crc = new CRC32();
            crc.update(in, start, pos - start);
            int stored = (in[pos] & 0xff) | (in[pos + 1] & 0xff) << 8;
            if (stored != (int) (crc.getValue() & 0xffff)) {
                throw new CodecException("gzip data is corrupt: header crc mismatch");
            }
            pos += 2;
        }
        return pos;
    }

    private static void need(int pos, int n, int end) throws CodecException {
        if ((long) pos + n > end) {
            throw new CodecException("gzip data is truncated");
        }
    }

    private static long le32(byte[] in, int pos) {
        return (in[pos] & 0xffL)
                | (in[pos + 1] & 0xffL) << 8
                | (in[pos + 2] & 0xffL) << 16
                | (in[pos + 3] & 0xffL) << 24;
    }

    // --- snappy -----------------------------------------------------------------------------------------

    private static Output unsnappy(byte[] in, int off, int len, long requested) throws CodecException {
        long limit = effectiveLimit(requested);
        Output out = new Output(limit, 0);
        if (len >= XERIAL_HEADER_SIZE && startsWith(in, off, XERIAL_MAGIC)) {
            // Java's framing. Its version and compatible fields are not checked, as librdkafka does not.
            int pos = off + XERIAL_HEADER_SIZE;
            int end = off + len;
            while (pos < end) {
                if (pos + 4 > end) {
                    throw new CodecException("xerial snappy block length is truncated");
                }
                int size = (in[pos] & 0xff) << 24 | (in[pos + 1] & 0xff) << 16 | (in[pos + 2] & 0xff) << 8
                        | (in[pos + 3] & 0xff);
                pos += 4;
                if (size < 0 || (long) pos + size > end) {
                    throw new CodecException("xerial snappy block of " + size + " bytes runs past the data");
                }
                rawSnappy(in, pos, size, limit - out.size, limit, out);
                pos += size;
            }
            return out;
        }
        rawSnappy(in, off, len, limit, limit, out);
        return out;
    }

    /** One raw block that may produce {@code budget} bytes, the rest of the whole stream's {@code limit}. */
    private static void rawSnappy(byte[] in, int off, int len, long budget, long limit, Output out)
            throws CodecException {
        try {
            // The varint preamble declares the block's size: a bomb is refused before anything is allocated,
            // and decompression then writes exactly that many bytes or fails.
            int size = Snappy.uncompressedLength(in, off, len);
            if (size < 0) {
                throw new CodecException("snappy data is corrupt: the declared length does not fit in 32 bits");
            }
            if (size > budget) {
                throw tooLarge("snappy", limit);
            }
            out.reserve(size);
            int n = Snappy.uncompress(in, off, len, out.buf, out.size);
            if (n != size) {
                throw new CodecException("snappy data is corrupt: " + n + " bytes instead of the declared " + size);
            }
            out.size += n;
        } catch (IOException | SnappyError e) {
            throw new CodecException("snappy data is corrupt: " + e.getMessage());
        }
    }

    private static boolean startsWith(byte[] in, int off, byte[] prefix) {
        for (int i = 0; i < prefix.length; i++) {
            if (in[off + i] != prefix[i]) {
                return false;
            }
        }
        return true;
    }

    // --- lz4 and zstd: streams read into a bounded buffer -----------------------------------------------

    private static Output unlz4(byte[] in, int off, int len, long requested) throws CodecException {
        long limit = effectiveLimit(requested);
        Output out = new Output(limit, 4 * len);
        try (InputStream stream = new LZ4FrameInputStream(new ByteArrayInputStream(in, off, len))) {
            readBounded(stream, out, limit, "lz4");
        } catch (IOException | RuntimeException e) {
            // lz4-java reports a bad block as an LZ4Exception, and a bad frame descriptor (reserved bits,
            // version) as a plain RuntimeException: both are this stream's bytes, and nothing else runs here.
            throw new CodecException("lz4 data is corrupt: " + e.getMessage());
        }
        return out;
    }

    private static Output unzstd(byte[] in, int off, int len, long requested) throws CodecException {
        long limit = effectiveLimit(requested);
        Output out = new Output(limit, 4 * len);
        try (InputStream stream = new ZstdInputStream(new ByteArrayInputStream(in, off, len))) {
            readBounded(stream, out, limit, "zstd");
        } catch (IOException | ZstdException e) {
            throw new CodecException("zstd data is corrupt: " + e.getMessage());
        }
        return out;
    }

    private static void readBounded(InputStream stream, Output out, long limit, String name)
            throws IOException, CodecException {
        while (true) {
            if (out.size == out.buf.length) {
                out.reserve(1);
            }
            int want = (int) Math.min(out.buf.length - out.size, out.room());
            int n = stream.read(out.buf, out.size, want);
            if (n < 0) {
                return;
            }
            out.size += n;
            if (out.size > limit) {
                throw tooLarge(name, limit);
            }
        }
    }
}
