// kafkajs 2.2.4 with @kafkajs/confluent-schema-registry 4.1.0 against a Strata agent whose topic validates
// schemas: node schema_registry.mjs <host:port> <registry url> <topic>
//
// Registers two Avro schemas through the agent's registry (its own port) with the library's client: an
// order under <topic>-value, the subject the topic's TopicNameStrategy names, and a payment under
// <topic>-payments-value. Then producer.send with acks -1 and no retries, each send one Produce request:
// orders encoded by the library (registry.encode: magic byte, id, Avro binary), gzip-compressed; a
// tombstone; a payment (its id is not a version of the topic's subject); and a payment to partition 0
// beside an order to partition 1 in one request. Prints one JSON document: the two ids and, per send,
// whether it succeeded or kafkajs's error (name, type, code, retriable). Exits non-zero on anything else.
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry'
import { CompressionTypes, Kafka, logLevel } from 'kafkajs'

const [bootstrap, registryUrl, topic] = process.argv.slice(2)
if (!bootstrap || !registryUrl || !topic) {
  console.error('usage: node schema_registry.mjs <host:port> <registry url> <topic>')
  process.exit(2)
}
const record = (name, fields) => JSON.stringify({ type: 'record', name, namespace: 'shop', fields })
const ORDER = record('Order', [
  { name: 'id', type: 'long' },
  { name: 'item', type: 'string' },
])
const PAYMENT = record('Payment', [{ name: 'cents', type: 'int' }])

async function send(producer, name, messages, compression = CompressionTypes.None) {
  try {
    await producer.send({ topic, acks: -1, compression, messages })
    return { name, ok: true }
  } catch (error) {
    const cause = error.cause ?? error
    const { type, code, retriable } = cause
    return { name, ok: false, error: { name: cause.name, type, code, retriable } }
  }
}

async function main() {
  const registry = new SchemaRegistry({ host: registryUrl })
  const order = await registry.register(
    { type: SchemaType.AVRO, schema: ORDER },
    { subject: `${topic}-value` },
  )
  const payment = await registry.register(
    { type: SchemaType.AVRO, schema: PAYMENT },
    { subject: `${topic}-payments-value` },
  )
  const encodeOrder = i => registry.encode(order.id, { id: i, item: `item-${i}` })
  const orders = await Promise.all([1, 2, 3].map(async i => ({ partition: 0, value: await encodeOrder(i) })))
  const cents = await registry.encode(payment.id, { cents: 5 })

  const kafka = new Kafka({
    clientId: 'strata-kafkajs-registry',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
  })
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 0 } })
  await producer.connect()
  const results = []
  try {
    results.push(await send(producer, 'accepted', orders, CompressionTypes.GZIP))
    results.push(await send(producer, 'tombstone', [{ partition: 0, key: 'k', value: null }]))
    results.push(await send(producer, 'wrong subject', [{ partition: 0, value: cents }]))
    const beside = await encodeOrder(4)
    results.push(
      await send(producer, 'other partitions', [
        { partition: 0, value: cents },
        { partition: 1, value: beside },
      ]),
    )
  } finally {
    await producer.disconnect()
  }
  console.log(JSON.stringify({ order: order.id, payment: payment.id, results }))
}

main().catch(error => {
  console.error(error)
  process.exit(1)
})
