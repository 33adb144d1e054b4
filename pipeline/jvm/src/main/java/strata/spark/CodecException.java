package strata.spark;

/**
 * Bytes that do not decode as the format they claim to be: the JVM twin of Python's {@code CodecError}.
 *
 * <p>Thrown by the sans-IO decoders ({@link ChunkDecoder}, {@link Compression}) with exactly the message the
 * Python reference decoder gives for the same bytes ({@code storage/records/codec.py},
 * {@code storage/records/compression.py}, {@code storage/fileformat.py}); {@link StrataPartitionReader} turns it into a
 * {@link StrataReadException} that names the object and the chunk. Checked, so no decoding path can forget it.
 */
final class CodecException extends Exception {
    private static final long serialVersionUID = 1L;

    CodecException(String message) {
        super(message);
    }
}
