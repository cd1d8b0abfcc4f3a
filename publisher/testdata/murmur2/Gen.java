import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.Utils;

// Prints Go table rows: key, Utils.murmur2(key), and
// Utils.toPositive(Utils.murmur2(key)) % n for each n.
public class Gen {
    public static void main(String[] args) {
        int[] ns = {2, 3, 6, 7, 12, 16, 31, 64};
        String[] keys = {
            "", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh",
            "21", "foobar", "a-little-bit-long-string", "a-little-bit-longer-string",
            "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            "0", "1", "7", "42", "1000", "99999", "123456789", "9223372036854775807",
            "order-42", "ord_2k9", "ord_6w1b", "customer/17", "Order:7f",
            "00000000-0000-4000-8000-000000000001", "7c4f7d6e-2f55-4c4e-9f4e-0d9b8a3c1e21",
            "0190d5f2-7c3a-7b1e-9a4f-174876e800", "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11",
            "\"00000000-0000-4000-8000-000000000001\"", "{\"id\":42}",
            "caf\u00e9", "\u65e5\u672c", "\u00ff\u00fe\u00fd", "k\u0000ey", "\u0000\u0000\u0000\u0000\u0007H00000000-0000-4000-8000-000000000001",
        };
        for (String k : keys) {
            byte[] b = k.getBytes(StandardCharsets.UTF_8);
            int h = Utils.murmur2(b);
            StringBuilder sb = new StringBuilder();
            sb.append("\t{").append(goQuote(b)).append(", ").append(h).append(", [8]int{");
            for (int i = 0; i < ns.length; i++) {
                if (i > 0) sb.append(", ");
                sb.append(Utils.toPositive(h) % ns[i]);
            }
            sb.append("}},");
            System.out.println(sb);
        }
    }

    static String goQuote(byte[] b) {
        StringBuilder sb = new StringBuilder("\"");
        for (byte x : b) {
            int c = x & 0xff;
            if (c == '"' || c == '\\') sb.append('\\').append((char) c);
            else if (c >= 0x20 && c < 0x7f) sb.append((char) c);
            else sb.append(String.format("\\x%02x", c));
        }
        return sb.append('"').toString();
    }
}
