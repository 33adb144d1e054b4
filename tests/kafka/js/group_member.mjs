// kafkajs 2.2.4 consumer group member, for tests/kafka/test_group_mixed.py:
//   node group_member.mjs <host:port> <topic> <group> <name> [sessionTimeoutMs] [heartbeatIntervalMs]
//
// The kafkajs twin of tests/kafka/group_member.py (same JSON lines on stdout, same stdin protocol): it
// joins <group> with client id <name>, commits each record's offset + 1 before taking the next one
// (autoCommit off), and on a line `stop` or end of file on stdin disconnects (LeaveGroup) and exits 0.
//
// kafkajs's round-robin assigner calls its protocol "RoundRobinAssigner", which no other client knows, so
// a group mixing kafkajs with Java-style clients could never agree on a protocol. The same assigner
// under the name every other client uses, "roundrobin" (the wire format is Kafka's ConsumerProtocol in
// both), lets kafkajs join such a group and lead it.
import readline from 'node:readline'
import { Kafka, PartitionAssigners, logLevel } from 'kafkajs'

const [bootstrap, topic, group, name, sessionText, heartbeatText] = process.argv.slice(2)
if (!bootstrap || !topic || !group || !name) {
  console.error('usage: node group_member.mjs <host:port> <topic> <group> <name> [sessionMs] [heartbeatMs]')
  process.exit(2)
}
const sessionTimeout = Number(sessionText || 6000)
const heartbeatInterval = Number(heartbeatText || 300)

function emit(ev, fields = {}) {
  // Writes to a pipe are synchronous in Node on Linux: the lines are out before process.exit.
  process.stdout.write(JSON.stringify({ ev, t: Date.now() / 1000, ...fields }) + '\n')
}

const roundrobin = args => ({ ...PartitionAssigners.roundRobin(args), name: 'roundrobin' })

async function main() {
  emit('start', { client: 'kafkajs', name })
  const kafka = new Kafka({ clientId: name, brokers: [bootstrap], logLevel: logLevel.NOTHING })
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout,
    heartbeatInterval,
    rebalanceTimeout: 20000,
    maxWaitTimeInMs: 250, // kafkajs heartbeats from its fetch loop: an idle fetch must not outlast it
    partitionAssigners: [roundrobin],
  })
  let owned = []
  consumer.on(consumer.events.GROUP_JOIN, e => {
    owned = [...(e.payload.memberAssignment[topic] || [])].sort((a, b) => a - b)
    emit('assigned', { parts: owned })
  })
  consumer.on(consumer.events.REBALANCING, () => {
    emit('revoked', { parts: owned })
    owned = []
  })
  consumer.on(consumer.events.CRASH, e => emit('error', { error: String(e.payload.error) }))

  let stopping = null
  const stop = () => {
    if (stopping === null) {
      stopping = consumer.disconnect().then(() => {
        emit('closed')
        process.exit(0)
      })
    }
    return stopping
  }
  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', line => {
    if (line.trim() === 'stop') stop()
  })
  lines.on('close', () => stop())

  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const o = Number(message.offset)
      emit('rec', { p: partition, o })
      try {
        await consumer.commitOffsets([{ topic, partition, offset: String(o + 1) }])
        emit('commit', { p: partition, o: o + 1 })
      } catch (err) {
        emit('commit_failed', { p: partition, o: o + 1, error: String(err) })
      }
    },
  })
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : String(err))
  process.exit(1)
})
