// kafkajs 2.2.4 transactions: node transactions.mjs <host:port> <output topic> <input topic> <txn id> <group>
//
// Both topics exist (2 partitions each; the input holds 10 plain records in each partition). A transactional
// producer (idempotent, one request in flight, as kafkajs requires) runs three transactions on the output:
//   1. commits c0-0..c0-2 to partition 0 and c1-0, c1-1 to partition 1;
//   2. writes x0-0, x0-1 to partition 0 and aborts;
//   3. writes last-0 and last-1 (one to each partition) and sendOffsets for <group> on the input (offset 10
//      in both partitions: "everything consumed"), then commits.
// Then a kafkajs consumer (its own group; read_committed is kafkajs's default) reads the output from the
// beginning until it has seen last-0 and last-1: records come in offset order within a partition, so an
// aborted record it wrongly returned would have come before them. kafkajs's admin fetches <group>'s offsets.
// Prints one JSON document on stdout; tests/kafka/test_transactions_kafkajs.py asserts on it. Exits non-zero
// on any error, so the test sees kafkajs's own message.
import { Kafka, logLevel } from 'kafkajs'

const [bootstrap, output, input, transactionalId, group] = process.argv.slice(2)
if (!bootstrap || !output || !input || !transactionalId || !group) {
  console.error('usage: node transactions.mjs <host:port> <output> <input> <txn id> <group>')
  process.exit(2)
}
const READ_TIMEOUT_MS = 30_000

const sentOffsets = results =>
  results.map(r => ({ partition: r.partition, errorCode: r.errorCode, baseOffset: Number(r.baseOffset) }))

async function main() {
  const kafka = new Kafka({ clientId: 'strata-kafkajs-txn', brokers: [bootstrap], logLevel: logLevel.WARN })
  const out = {}
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  try {
    const committed = await producer.transaction()
    out.committed = sentOffsets(
      await committed.send({
        topic: output,
        messages: [
          ...[0, 1, 2].map(i => ({ value: `c0-${i}`, partition: 0 })),
          ...[0, 1].map(i => ({ value: `c1-${i}`, partition: 1 })),
        ],
      }),
    )
    await committed.commit()

    const aborted = await producer.transaction()
    out.aborted = sentOffsets(
      await aborted.send({ topic: output, messages: [0, 1].map(i => ({ value: `x0-${i}`, partition: 0 })) }),
    )
    await aborted.abort()

    const last = await producer.transaction()
    out.last = sentOffsets(
      await last.send({ topic: output, messages: [0, 1].map(p => ({ value: `last-${p}`, partition: p })) }),
    )
    await last.sendOffsets({
      consumerGroupId: group,
      topics: [{ topic: input, partitions: [0, 1].map(partition => ({ partition, offset: '10' })) }],
    })
    await last.commit()
  } finally {
    await producer.disconnect()
  }

  out.records = await readCommitted(kafka)

  const admin = kafka.admin()
  await admin.connect()
  try {
    const [offsets] = await admin.fetchOffsets({ groupId: group, topics: [input] })
    out.groupOffsets = offsets.partitions
      .map(p => ({ partition: p.partition, offset: Number(p.offset) }))
      .sort((a, b) => a.partition - b.partition)
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

async function readCommitted(kafka) {
  const consumer = kafka.consumer({ groupId: `${group}-reader`, maxWaitTimeInMs: 200 })
  const records = []
  const pending = new Set(['last-0', 'last-1'])
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [output], fromBeginning: true })
    let done
    const finished = new Promise(resolve => (done = resolve))
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        const value = message.value.toString('utf8')
        records.push({ partition, offset: Number(message.offset), value })
        pending.delete(value)
        if (pending.size === 0) done()
      },
    })
    const timer = setTimeout(done, READ_TIMEOUT_MS)
    await finished
    clearTimeout(timer)
  } finally {
    await consumer.disconnect()
  }
  return records.sort((a, b) => a.partition - b.partition || a.offset - b.offset)
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
