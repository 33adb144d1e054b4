package strata.spark;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;

/**
 * The executor's reader without Spark, for tests and for looking at a file by hand: decodes every file of a
 * task list ({@link TaskList}) through the local Hadoop filesystem and prints what the source would return.
 *
 * <pre>
 * java -cp strata-spark.jar:$PYSPARK/jars/* strata.spark.DecodeTool TASKS_FILE INCLUDE_HEADERS [MERGE_GAP]
 * </pre>
 *
 * Output, one line each, fields separated by tabs: {@code file KEY}, then per row {@code row topic partition
 * offset timestamp_us timestampType key value [headers]}, then {@code ok}, or {@code error MESSAGE} (a
 * {@link StrataReadException}), or {@code unexpected CLASS: MESSAGE} (any other exception: a bug). Bytes are
 * lowercase hex, a null is {@code ~}; headers are {@code key:value} pairs (key hex too) joined by commas.
 * Each file is read on its own, so one file's error does not hide the others'.
 */
public final class DecodeTool {
    private DecodeTool() {}

    public static void main(String[] args) throws IOException {
        if (args.length < 2) {
            System.err.println("usage: DecodeTool TASKS_FILE INCLUDE_HEADERS [MERGE_GAP]");
            System.exit(2);
        }
        String text = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
        boolean withHeaders = Boolean.parseBoolean(args[1]);
        long mergeGap = args.length > 2 ? Long.parseLong(args[2]) : StrataPartitionReader.MERGE_GAP;
        Configuration conf = new Configuration();
        PrintStream out = new PrintStream(
                new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false, "UTF-8");
        for (TaskList.FileTask file : TaskList.parse(text)) {
            out.println("file\t" + file.objectKey);
            int[] columns = StrataSource.allColumns(withHeaders);
            try (StrataPartitionReader reader =
                    new StrataPartitionReader(List.of(file), conf, columns, mergeGap, true)) {
                while (reader.next()) {
                    out.println(format(reader.get(), withHeaders));
                }
                out.println("ok");
            } catch (StrataReadException e) {
                out.println("error\t" + oneLine(e.getMessage()));
            } catch (IOException | RuntimeException e) {
                out.println("unexpected\t" + e.getClass().getName() + ": " + oneLine(String.valueOf(e.getMessage())));
            }
        }
        out.flush();
    }

    private static String format(InternalRow row, boolean withHeaders) {
        StringBuilder line = new StringBuilder("row");
        line.append('\t').append(row.getUTF8String(2));
        line.append('\t').append(row.getInt(3));
        line.append('\t').append(row.getLong(4));
        line.append('\t').append(row.getLong(5));
        line.append('\t').append(row.getInt(6));
        line.append('\t').append(row.isNullAt(0) ? "~" : hex(row.getBinary(0)));
        line.append('\t').append(row.isNullAt(1) ? "~" : hex(row.getBinary(1)));
        if (withHeaders) {
            ArrayData headers = row.getArray(7);
            line.append('\t');
            for (int i = 0; i < headers.numElements(); i++) {
                InternalRow header = headers.getStruct(i, 2);
                if (i > 0) {
                    line.append(',');
                }
                line.append(hex(header.getUTF8String(0).getBytes())).append(':');
                line.append(header.isNullAt(1) ? "~" : hex(header.getBinary(1)));
            }
        }
        return line.toString();
    }

    private static String hex(byte[] bytes) {
        StringBuilder s = new StringBuilder(2 * bytes.length);
        for (byte b : bytes) {
            s.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return s.toString();
    }

    private static String oneLine(String message) {
        return message.replace('\n', ' ').replace('\r', ' ');
    }
}
