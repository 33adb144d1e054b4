package strata.spark;

/**
 * A Strata error raised on an executor, carrying the stable code of its Python class in
 * {@code storage/errors.py}, so a failed Spark job says the same thing the Python decoder would.
 *
 * <p>The message is {@code "<Python class> <code>: <message>"}, for example
 * {@code "CodecError 50002: chunk in data/l0/x.strata fails its CRC-32C check (stored 0x1234abcd, computed
 * 0x00c0ffee)"}. Decoding errors keep the reference decoder's wording and add where they happened: the object
 * key, and the topic, partition and byte position of the chunk. Callers tell errors apart by {@link #code()},
 * never by the text.
 */
public final class StrataReadException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** {@code CodecError} (a {@code CorruptObject}): stored bytes fail a checksum or do not decode. */
    public static final int CORRUPT_OBJECT = 50002;
    /** {@code ObjectNotFound}: an object the snapshot names is not in the store. */
    public static final int OBJECT_NOT_FOUND = 50004;
    /** {@code StrataError}: a bug, here a task list the driver should never have written. */
    public static final int INTERNAL = 50001;

    private final int code;
    private final String objectKey;

    StrataReadException(String errorClass, int code, String message, String objectKey, Throwable cause) {
        super(errorClass + " " + code + ": " + message, cause);
        this.code = code;
        this.objectKey = objectKey;
    }

    static StrataReadException corrupt(String message, String objectKey) {
        return new StrataReadException("CodecError", CORRUPT_OBJECT, message, objectKey, null);
    }

    static StrataReadException notFound(String message, String objectKey, Throwable cause) {
        return new StrataReadException("ObjectNotFound", OBJECT_NOT_FOUND, message, objectKey, cause);
    }

    static StrataReadException internal(String message) {
        return new StrataReadException("StrataError", INTERNAL, message, null, null);
    }

    /** The stable code of the Python error class (storage/errors.py). */
    public int code() {
        return code;
    }

    /** The object the error is about, or null. */
    public String objectKey() {
        return objectKey;
    }
}
