"""Apache Kafka's own Java client, tools and broker, run against Strata (and against a real broker, the
reference). The jars come from Maven Central through tools/kafka/pom.xml (``make kafka-java``)."""
