package strata.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;

/**
 * The scan of one read, on the driver: files packed into input partitions, and the factory of their readers.
 *
 * <p>Packing is Spark's own for file sources ({@code FilePartition.getFilePartitions}), so a read makes as many
 * tasks as {@code binaryFile} over the same objects would: files by decreasing size, next fit, into partitions
 * of at most {@code min(spark.sql.files.maxPartitionBytes, max(openCostInBytes, total / parallelism))} bytes,
 * each file costing its chunk bytes plus {@code spark.sql.files.openCostInBytes}. A file is never split.
 *
 * <p>The session's Hadoop configuration ({@code sessionState.newHadoopConf()}: {@code spark.hadoop.*}, the s3a
 * settings of {@code pipeline/session.py}) is broadcast once per scan to the executors, which open the objects
 * with {@code Path.getFileSystem(conf)}.
 */
final class StrataScan implements ScanBuilder, SupportsPushDownRequiredColumns, Scan, Batch {
    private final List<TaskList.FileTask> files;
    private final StructType fullSchema;
    private final boolean failOnDataLoss;
    private StructType schema;
    private int[] columns; // indexes into fullSchema of the columns rows hold

    StrataScan(List<TaskList.FileTask> files, StructType fullSchema, boolean failOnDataLoss) {
        this.files = files;
        this.fullSchema = fullSchema;
        this.failOnDataLoss = failOnDataLoss;
        this.schema = fullSchema;
        this.columns = StrataSource.allColumns(fullSchema.length() > StrataSource.HEADERS);
    }

    /**
     * Only the columns the query uses are built (all records are still decoded and checked): a count
     * copies no key or value. Pruning is by top-level column; a column is kept whole.
     */
    @Override
    public void pruneColumns(StructType required) {
        List<StructField> kept = new ArrayList<>();
        List<Integer> indexes = new ArrayList<>();
        StructField[] fields = fullSchema.fields();
        for (int i = 0; i < fields.length; i++) {
            if (required.getFieldIndex(fields[i].name()).isDefined()) {
                kept.add(fields[i]);
                indexes.add(i);
            }
        }
        schema = new StructType(kept.toArray(new StructField[0]));
        columns = indexes.stream().mapToInt(Integer::intValue).toArray();
    }

    @Override
    public Scan build() {
        return this;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        int chunks = 0;
        for (TaskList.FileTask file : files) {
            chunks += file.chunks.size();
        }
        return "Strata [" + files.size() + " files, " + chunks + " chunks, columns " + schema.simpleString() + "]";
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        SQLConf conf = SQLConf.get();
        long openCost = conf.filesOpenCostInBytes();
        int parallelism = Math.max(1, SparkSession.active().sparkContext().defaultParallelism());
        return pack(files, conf.filesMaxPartitionBytes(), openCost, parallelism);
    }

    static InputPartition[] pack(List<TaskList.FileTask> files, long maxPartitionBytes, long openCost,
            int parallelism) {
        long total = 0;
        for (TaskList.FileTask file : files) {
            total += file.bytes() + openCost;
        }
        long maxSplit = Math.min(maxPartitionBytes, Math.max(openCost, total / parallelism));
        List<TaskList.FileTask> bySize = new ArrayList<>(files);
        bySize.sort(Comparator.comparingLong(TaskList.FileTask::bytes).reversed());
        List<InputPartition> partitions = new ArrayList<>();
        List<TaskList.FileTask> current = new ArrayList<>();
        long size = 0;
        for (TaskList.FileTask file : bySize) {
            if (!current.isEmpty() && size + file.bytes() > maxSplit) {
                partitions.add(new FileGroup(current));
                current = new ArrayList<>();
                size = 0;
            }
            current.add(file);
            size += file.bytes() + openCost;
        }
        if (!current.isEmpty()) {
            partitions.add(new FileGroup(current));
        }
        return partitions.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        SparkSession session = SparkSession.active();
        Configuration hadoopConf = session.sessionState().newHadoopConf();
        return new ReaderFactory(
                SerializableConfiguration.broadcast(session.sparkContext(), hadoopConf), columns, failOnDataLoss);
    }

    /** One task's files. */
    static final class FileGroup implements InputPartition {
        private static final long serialVersionUID = 1L;

        final List<TaskList.FileTask> files;

        FileGroup(List<TaskList.FileTask> files) {
            this.files = files;
        }
    }

    /** Shipped to the executors: the broadcast Hadoop configuration and the columns rows hold. */
    static final class ReaderFactory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;

        private final Broadcast<SerializableConfiguration> hadoopConf;
        private final int[] columns;
        private final boolean failOnDataLoss;

        ReaderFactory(Broadcast<SerializableConfiguration> hadoopConf, int[] columns, boolean failOnDataLoss) {
            this.hadoopConf = hadoopConf;
            this.columns = columns;
            this.failOnDataLoss = failOnDataLoss;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            return new StrataPartitionReader(((FileGroup) partition).files, hadoopConf.value().value(), columns,
                    StrataPartitionReader.MERGE_GAP, failOnDataLoss);
        }
    }
}
