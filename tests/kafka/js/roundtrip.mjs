// kafkajs 2.2.4 against a Strata agent: node roundtrip.mjs <host:port> <topic> [none|gzip]
//
// Admin createTopics (twice: the second must report "already exists"), producer sends with acks -1
// (keyed records with headers, a null key, then three records to partition 1 in one batch compressed
// with the given codec: gzip is the one kafkajs ships), admin fetchTopicOffsets and
// fetchTopicOffsetsByTimestamp, then reads every partition back from offset 0; then deleteTopicRecords
// below offset 3 of a third topic holding 5 records.
//
// kafkajs has no group-free consumer (its Consumer always joins a group; group.mjs tests that), so the
// read-back here, which must see every partition from offset 0, uses the Cluster that kafkajs builds for its own clients (private symbol
// "private:Kafka:createCluster") and its Broker.fetch: the same Metadata, Fetch request encoding and
// RecordBatch decoding its Consumer uses, minus the group protocol.
// Prints one JSON document on stdout; tests/kafka/test_kafkajs.py asserts on it. Exits non-zero on
// any error, so the test sees kafkajs's own message.
import { CompressionTypes, Kafka, logLevel } from 'kafkajs'

const [bootstrap, topic, codec = 'none'] = process.argv.slice(2)
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }
if (!bootstrap || !topic || !(codec in CODECS)) {
  console.error('usage: node roundtrip.mjs <host:port> <topic> [none|gzip]')
  process.exit(2)
}
const PARTITIONS = 3
const KEYED = 30
const GONE = `${topic}-gone`

const text = buf => (buf === null || buf === undefined ? null : buf.toString('utf8'))
const headerText = headers =>
  Object.fromEntries(Object.entries(headers ?? {}).map(([k, v]) => [k, text(v)]))

async function main() {
  const kafka = new Kafka({ clientId: 'strata-kafkajs', brokers: [bootstrap], logLevel: logLevel.WARN })
  const admin = kafka.admin()
  await admin.connect()
  const out = {}
  try {
    out.created = await admin.createTopics({
      topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }, { topic: GONE }],
      waitForLeaders: true,
    })
    // kafkajs resolves false (not an error) when every topic already exists.
    out.createdAgain = await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] })
    out.topicsAfterCreate = (await admin.listTopics()).sort()
    const meta = await admin.fetchTopicMetadata({ topics: [topic] })
    out.partitionIds = meta.topics[0].partitions.map(p => p.partitionId).sort()

    const before = Date.now()
    const producer = kafka.producer({ allowAutoTopicCreation: false })
    await producer.connect()
    const sent = []
    try {
      const keyed = Array.from({ length: KEYED }, (_, i) => ({
        key: `k${i}`,
        value: `v${i}`,
        headers: { idx: String(i), origin: 'kafkajs' },
      }))
      sent.push(...(await producer.send({ topic, acks: -1, messages: keyed })))
      sent.push(
        ...(await producer.send({
          topic,
          acks: -1,
          messages: [{ key: null, value: 'null-key', partition: 0, headers: { kind: 'null-key' } }],
        })),
      )
      sent.push(
        ...(await producer.send({
          topic,
          acks: -1,
          compression: CODECS[codec],
          messages: [1, 2, 3].map(i => ({ key: `${codec}${i}`, value: `${codec}-${i}`, partition: 1 })),
        })),
      )
    } finally {
      await producer.disconnect()
    }
    out.sent = sent.map(r => ({ partition: r.partition, errorCode: r.errorCode, baseOffset: r.baseOffset }))

    out.offsets = (await admin.fetchTopicOffsets(topic)).map(p => ({
      partition: p.partition,
      low: Number(p.low),
      high: Number(p.high),
    }))
    out.offsetsAtBefore = (await admin.fetchTopicOffsetsByTimestamp(topic, before)).map(p => ({
      partition: p.partition,
      offset: Number(p.offset),
    }))
    // No record is that new: Kafka answers -1 and kafkajs substitutes the high watermark.
    out.offsetsInFuture = (await admin.fetchTopicOffsetsByTimestamp(topic, Date.now() + 3_600_000)).map(
      p => ({ partition: p.partition, offset: Number(p.offset) }),
    )

    out.records = await readAll(kafka, topic, out.partitionIds, out.offsets)

    // DeleteRecords on a topic of its own (the read-back after this script starts at offset 0).
    const TRIM = `${topic}-trim`
    await admin.createTopics({ topics: [{ topic: TRIM, numPartitions: 1 }], waitForLeaders: true })
    const trimmer = kafka.producer({ allowAutoTopicCreation: false })
    await trimmer.connect()
    try {
      await trimmer.send({ topic: TRIM, acks: -1, messages: [1, 2, 3, 4, 5].map(i => ({ value: `t${i}` })) })
    } finally {
      await trimmer.disconnect()
    }
    await admin.fetchTopicMetadata({ topics: [TRIM] }) // deleteTopicRecords looks leaders up in it
    await admin.deleteTopicRecords({ topic: TRIM, partitions: [{ partition: 0, offset: '3' }] })
    out.trimmedOffsets = (await admin.fetchTopicOffsets(TRIM)).map(p => ({
      partition: p.partition,
      low: Number(p.low),
      high: Number(p.high),
    }))

    await admin.deleteTopics({ topics: [GONE] })
    out.topicsAfterDelete = (await admin.listTopics()).sort()
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

// Fetch every partition from offset 0 up to its high watermark, through the partition leaders.
async function readAll(kafka, topicName, partitionIds, offsets) {
  const create = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  if (!create) throw new Error('kafkajs changed: no private:Kafka:createCluster on the Kafka instance')
  const cluster = kafka[create]({ allowAutoTopicCreation: false })
  await cluster.connect()
  const records = []
  try {
    await cluster.addTargetTopic(topicName)
    await cluster.refreshMetadata()
    const leaders = cluster.findLeaderForPartitions(topicName, partitionIds)
    const next = Object.fromEntries(partitionIds.map(p => [p, 0]))
    const high = Object.fromEntries(offsets.map(p => [p.partition, p.high]))
    for (let round = 0; round < 50 && partitionIds.some(p => next[p] < high[p]); round++) {
      for (const [nodeId, parts] of Object.entries(leaders)) {
        const broker = await cluster.findBroker({ nodeId })
        const pending = parts.filter(p => next[p] < high[p])
        if (pending.length === 0) continue
        const response = await broker.fetch({
          maxWaitTime: 100,
          topics: [
            {
              topic: topicName,
              partitions: pending.map(p => ({ partition: p, fetchOffset: String(next[p]), maxBytes: 1 << 20 })),
            },
          ],
        })
        for (const t of response.responses) {
          for (const p of t.partitions) {
            if (p.errorCode !== 0) throw new Error(`fetch ${topicName}/${p.partition}: error ${p.errorCode}`)
            for (const m of p.messages) {
              const offset = Number(m.offset)
              if (offset < next[p.partition]) continue // a batch may start before the fetch offset
              records.push({
                partition: p.partition,
                offset,
                key: text(m.key),
                value: text(m.value),
                headers: headerText(m.headers),
                timestamp: Number(m.timestamp),
              })
              next[p.partition] = offset + 1
            }
          }
        }
      }
    }
  } finally {
    await cluster.disconnect()
  }
  return records
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
