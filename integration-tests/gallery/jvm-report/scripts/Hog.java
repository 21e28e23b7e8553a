// Keeps allocating until the call's memory limit stops it (reported as resource_limit).
import java.util.ArrayList;

public class Hog {
    public static void main(String[] args) {
        ArrayList<byte[]> kept = new ArrayList<>();
        for (;;) {
            byte[] block = new byte[1 << 20];
            java.util.Arrays.fill(block, (byte) 1);
            kept.add(block);
        }
    }
}
