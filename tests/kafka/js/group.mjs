// kafkajs 2.2.4 consumer group against a Strata agent: node group.mjs <host:port> <topic> <group> <count>
//
// Creates the topic (3 partitions), produces <count> keyed records, then runs a kafkajs Consumer in
// <group> (JoinGroup, SyncGroup, Heartbeat, OffsetCommit: kafkajs's own group protocol and round-robin
// assigner) until it has seen every record, commits, disconnects (LeaveGroup), and reads the group's
// committed offsets with admin.fetchOffsets. Prints one JSON document; exits non-zero on any error.
import { Kafka, logLevel } from 'kafkajs'

const [bootstrap, topic, group, countText] = process.argv.slice(2)
const count = Number(countText)
if (!bootstrap || !topic || !group || !(count > 0)) {
  console.error('usage: node group.mjs <host:port> <topic> <group> <count>')
  process.exit(2)
}

async function main() {
  const kafka = new Kafka({ clientId: 'strata-kafkajs-group', brokers: [bootstrap], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] })
  const producer = kafka.producer()
  await producer.connect()
  const messages = Array.from({ length: count }, (_, i) => ({ key: `k${i}`, value: `v${i}` }))
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const seen = new Set()
  let generation = null
  consumer.on(consumer.events.GROUP_JOIN, e => { generation = e.payload.groupId })
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`saw ${seen.size} of ${count} records in 60 s`)), 60000)
    consumer.run({
      autoCommit: true,
      eachMessage: async ({ message }) => {
        seen.add(message.value.toString('utf8'))
        if (seen.size === count) {
          clearTimeout(timer)
          resolve()
        }
      },
    }).catch(reject)
  })
  await consumer.commitOffsets([]) // flushes the resolved offsets
  await consumer.disconnect()
  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  const described = await admin.describeGroups([group])
  await admin.disconnect()
  const committed = offsets[0].partitions.reduce((sum, p) => sum + Math.max(Number(p.offset), 0), 0)
  console.log(JSON.stringify({ seen: seen.size, joined: generation, committed, state: described.groups[0].state }))
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : String(err))
  process.exit(1)
})
