// Quickstart: write a row, read it back, then follow the change stream with Subscribe.
//
//   mvn -q package -DskipTests          # builds target/classes and target/classpath.txt
//   java -cp target/classes:$(cat target/classpath.txt) examples/Quickstart.java \
//       127.0.0.1:7071,127.0.0.1:7072 [EVENTS]
//
// GATEWAY_TOKEN and GATEWAY_CA (a PEM file) turn on bearer tokens and TLS.

import io.gateway.client.GatewayClient;
import io.gateway.client.GatewayException;
import io.gateway.client.Position;
import io.gateway.client.Rows;
import io.gateway.client.Subscription;
import io.gateway.v1.ChangeEvent;
import io.gateway.v1.WriteResult;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

public class Quickstart {
  public static void main(String[] args) throws Exception {
    String targets = args.length > 0 ? args[0] : "127.0.0.1:7070";
    int events = args.length > 1 ? Integer.parseInt(args[1]) : 0; // 0: follow until Ctrl-C
    GatewayClient.Builder b = GatewayClient.builder().targets(Arrays.asList(targets.split(",")))
        .token(System.getenv("GATEWAY_TOKEN"));
    if (System.getenv("GATEWAY_CA") != null) {
      b.rootCertificates(Files.readAllBytes(Path.of(System.getenv("GATEWAY_CA"))));
    }
    try (GatewayClient client = b.build()) {
      long id = System.nanoTime();
      WriteResult r;
      try {
        r = client.write(List.of(Rows.insert("shop.items", Rows.cols("id", id),
            Rows.cols("name", "widget", "price", new BigDecimal("9.90")))));
      } catch (GatewayException e) {
        System.err.println("write failed: " + e.code() + " " + e.description() + " field=" + e.field());
        System.exit(1);
        return;
      }
      System.out.printf("wrote id %d: gtid %d:%d at log index %d%n", id, r.getGtid().getServerId(),
          r.getGtid().getTransId(), r.getLogIndex());
      System.out.println("read back: " + client.get("shop.items", id).orElse(null));

      try (Subscription sub = client.subscribe(Position.fromLogIndex(r.getLogIndex()))) {
        int n = 0;
        while (sub.hasNext()) {
          ChangeEvent ev = sub.next();
          System.out.printf("event: log index %d, gtid %d:%d, %d statement(s)%n", ev.getLogIndex(),
              ev.getTransaction().getGtid().getServerId(), ev.getTransaction().getGtid().getTransId(),
              ev.getTransaction().getStatementsCount());
          if (++n == events) {
            break;
          }
        }
      }
    }
  }
}
