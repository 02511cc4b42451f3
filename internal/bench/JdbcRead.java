import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.Statement;
import java.sql.Types;

/**
 * mssql-jdbc peer of {@code go run ./internal/bench -wire-peers}: reads one
 * query several times on one connection in one JVM (the later passes run
 * warm, JIT-compiled) and prints, per pass, one JSON line:
 * {"rows", "seconds", "cpu_seconds", }. cpu_seconds is this
 * process's CPU time over the pass (OperatingSystemMXBean.getProcessCpuTime):
 * the JVM's compiler and collector threads count, as they would for a user.
 *
 * <p>Every value is taken with the typed getter of its column's JDBC type
 * (getLong, getString, getBigDecimal, getTimestamp), the fastest documented
 * way to consume a result set.
 *
 * <p>Usage: java -cp mssql-jdbc.jar:. JdbcRead JDBC_URL QUERY PASSES
 */
public final class JdbcRead {
  public static void main(String[] args) throws Exception {
    String url = args[0], query = args[1];
    int passes = Integer.parseInt(args[2]);
    com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    try (Connection c = DriverManager.getConnection(url)) {
      String driver = c.getMetaData().getDriverVersion();
      for (int p = 0; p < passes; p++) {
        long cpu0 = os.getProcessCpuTime(), t0 = System.nanoTime();
        long rows = 0, sink = 0;
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
          ResultSetMetaData md = rs.getMetaData();
          int n = md.getColumnCount();
          int[] types = new int[n + 1];
          for (int i = 1; i <= n; i++) types[i] = md.getColumnType(i);
          while (rs.next()) {
            for (int i = 1; i <= n; i++) {
              Object v;
              switch (types[i]) {
                case Types.BIGINT: case Types.INTEGER: case Types.SMALLINT: case Types.TINYINT:
                  sink += rs.getLong(i);
                  continue;
                case Types.DECIMAL: case Types.NUMERIC:
                  v = rs.getBigDecimal(i);
                  break;
                case Types.TIMESTAMP:
                  v = rs.getTimestamp(i);
                  break;
                default:
                  v = rs.getString(i);
              }
              if (v != null) sink++;
            }
            rows++;
          }
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        double cpu = (os.getProcessCpuTime() - cpu0) / 1e9;
        System.out.printf("{\"rows\": %d, \"seconds\": %.6f, \"cpu_seconds\": %.6f, \"driver\": \"mssql-jdbc %s\", \"sink\": %d}%n",
            rows, seconds, cpu, driver, sink);
        System.out.flush();
      }
    }
  }
}
