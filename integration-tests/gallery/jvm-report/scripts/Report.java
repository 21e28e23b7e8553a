// Builds a report of 20,000 rows in memory and prints what it built as JSON.
public class Report {
    public static void main(String[] args) {
        StringBuilder csv = new StringBuilder("id,name,total\n");
        long sum = 0;
        for (int i = 0; i < 20000; i++) {
            csv.append(i).append(",item-").append(i).append(',').append(i * 3).append('\n');
            sum += i * 3L;
        }
        System.out.printf("{\"rows\": %d, \"bytes\": %d, \"sum\": %d}%n", 20000, csv.length(), sum);
    }
}
