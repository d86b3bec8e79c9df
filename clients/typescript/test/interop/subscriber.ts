// The TypeScript side of the cross-language test (clients/testing/test_cross_language.py):
// subscribes from a log index and prints one JSON line per transaction on TABLE until COUNT
// of them were seen.
//
//   node dist/test/interop/subscriber.js TARGETS FROM_LOG_INDEX TABLE COUNT
import { GatewayClient, fromValue } from "../../src/index";

async function main(): Promise<void> {
  const [targets, from, table, count] = process.argv.slice(2);
  const client = new GatewayClient(targets.split(","));
  let seen = 0;
  try {
    for await (const ev of client.subscribe({ fromLogIndex: BigInt(from) }, { signal: AbortSignal.timeout(120_000) })) {
      for (const st of ev.transaction?.statements ?? []) {
        if (st.kind?.$case !== "insert") continue;
        const ins = st.kind.value;
        if (`${ins.table?.schemaName}.${ins.table?.tableName}` !== table) continue;
        const rec = ins.records[0];
        const cols: Record<string, unknown> = {};
        ins.fields.forEach((f, i) => (cols[f.name] = fromValue(rec.afterValues[i])));
        console.log(
          JSON.stringify({
            id: Number(fromValue(rec.keyValues[0]) as bigint),
            server_id: ev.transaction?.gtid?.serverId,
            trans_id: Number(ev.transaction?.gtid?.transId),
            log_index: Number(ev.logIndex),
            name: cols.name,
            qty: Number(cols.qty as bigint),
          }),
        );
        seen++;
      }
      if (seen >= Number(count)) break;
    }
  } finally {
    client.close();
  }
}

main().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
