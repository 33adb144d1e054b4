// kafkajs 2.2.4 producing to a topic that validates schemas: node schema_validation.mjs <host:port> <topic>
//
// Reads the scenarios from stdin as JSON, [{name, codec: none|gzip, records: [{partition, key, value}]}],
// with keys and values base64 (null for a null one), as tests/kafka/schema_cases.py builds them (values
// framed as Confluent's serializers frame them). Each scenario is one producer.send with acks -1, so
// kafkajs sends its records as one Produce request, one batch per partition. Prints one JSON document:
// per scenario, whether the send succeeded and, if not, kafkajs's error (its name, type, code and whether
// it is retriable). kafkajs 2.2.4 speaks Produce up to v7, whose answer has no error message, so the
// message is kafkajs's own text for the code. Exits non-zero on anything else.
import { CompressionTypes, Kafka, logLevel } from 'kafkajs'

const [bootstrap, topic] = process.argv.slice(2)
if (!bootstrap || !topic) {
  console.error('usage: node schema_validation.mjs <host:port> <topic> < scenarios.json')
  process.exit(2)
}
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }
const bytes = text => (text === null ? null : Buffer.from(text, 'base64'))

async function readStdin() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

async function main() {
  const scenarios = await readStdin()
  const kafka = new Kafka({
    clientId: 'strata-kafkajs-schemas',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
  })
  // No retries: a refusal is final (INVALID_RECORD is not retriable), and a retried send would hide it.
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 0 } })
  await producer.connect()
  const out = []
  try {
    for (const scenario of scenarios) {
      const messages = scenario.records.map(r => ({
        partition: r.partition,
        key: bytes(r.key),
        value: bytes(r.value),
      }))
      try {
        const sent = await producer.send({ topic, acks: -1, compression: CODECS[scenario.codec], messages })
        out.push({ name: scenario.name, ok: true, partitions: sent.map(r => r.partition).sort() })
      } catch (error) {
        const cause = error.cause ?? error
        out.push({
          name: scenario.name,
          ok: false,
          error: {
            name: cause.name,
            type: cause.type,
            code: cause.code,
            retriable: cause.retriable,
            message: cause.message,
          },
        })
      }
    }
  } finally {
    await producer.disconnect()
  }
  console.log(JSON.stringify(out))
}

main().catch(error => {
  console.error(error)
  process.exit(1)
})
