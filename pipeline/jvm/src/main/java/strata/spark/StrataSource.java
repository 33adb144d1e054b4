package strata.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The Strata read source (DataSource V2): {@code spark.read.format("strata.spark.StrataSource")}, or the short
 * name {@code "strata"}. {@code pipeline/reader.py} is its one caller, and the only documented way in: it
 * takes the metadata snapshot on the driver and passes what to read as options.
 *
 * <ul>
 *   <li>{@code tasks}: the files and their chunks, in the text encoding of {@link TaskList}.
 *   <li>{@code includeHeaders}: "true" adds the {@code headers} column, as in Spark's Kafka source.
 * </ul>
 *
 * The schema is exactly the Kafka source's: key binary, value binary, topic string, partition int, offset
 * long, timestamp timestamp, timestampType int [, headers array&lt;struct&lt;key:string,value:binary&gt;&gt;],
 * every column nullable. Batch reads only.
 */
public final class StrataSource implements TableProvider, DataSourceRegister {
    static final String TASKS = "tasks";
    static final String INCLUDE_HEADERS = "includeHeaders";
    /** Spark's Kafka source's option: false skips (and logs) damaged chunks instead of failing the read. */
    static final String FAIL_ON_DATA_LOSS = "failOnDataLoss";

    // The columns, by their index in the full schema.
    static final int KEY = 0;
    static final int VALUE = 1;
    static final int TOPIC = 2;
    static final int PARTITION = 3;
    static final int OFFSET = 4;
    static final int TIMESTAMP = 5;
    static final int TIMESTAMP_TYPE = 6;
    static final int HEADERS = 7;

    @Override
    public String shortName() {
        return "strata";
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return schema(options.getBoolean(INCLUDE_HEADERS, false));
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new StrataTable(schema);
    }

    /** Every column of the schema, in order. */
    static int[] allColumns(boolean withHeaders) {
        return withHeaders ? new int[] {0, 1, 2, 3, 4, 5, 6, 7} : new int[] {0, 1, 2, 3, 4, 5, 6};
    }

    static StructType schema(boolean withHeaders) {
        StructType schema = new StructType()
                .add("key", DataTypes.BinaryType)
                .add("value", DataTypes.BinaryType)
                .add("topic", DataTypes.StringType)
                .add("partition", DataTypes.IntegerType)
                .add("offset", DataTypes.LongType)
                .add("timestamp", DataTypes.TimestampType)
                .add("timestampType", DataTypes.IntegerType);
        if (withHeaders) {
            StructType header = new StructType().add("key", DataTypes.StringType).add("value", DataTypes.BinaryType);
            schema = schema.add("headers", DataTypes.createArrayType(header, true));
        }
        return schema;
    }

    /** The table of one read: its schema, and a scan of the options' task list. */
    static final class StrataTable implements SupportsRead {
        private final StructType schema;

        StrataTable(StructType schema) {
            this.schema = schema;
        }

        @Override
        public String name() {
            return "strata";
        }

        // Deprecated in favour of columns() by newer Spark, but the one both 4.0 and 4.3 call.
        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            return new StrataScan(TaskList.parse(options.get(TASKS)), schema,
                    options.getBoolean(FAIL_ON_DATA_LOSS, true));
        }
    }
}
