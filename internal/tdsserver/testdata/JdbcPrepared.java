import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;

/**
 * Runs prepared statements through mssql-jdbc against internal/tdsserver's
 * test handler (TestPreparedStatementsJDBC) and prints what each returned,
 * one line per execution: the way the driver prepares a statement
 * (prepareMethod, from the URL) is the test's business.
 *
 * <p>Usage: java -cp mssql-jdbc.jar:. JdbcPrepared JDBC_URL...: one
 * connection after the other, each URL's output after a line "-- URL".
 */
public final class JdbcPrepared {
  public static void main(String[] args) throws Exception {
    for (String url : args) {
      System.out.println("-- " + url);
      run(url);
    }
  }

  private static void run(String url) throws Exception {
    try (Connection c = DriverManager.getConnection(url)) {
      for (int round = 0; round < 2; round++) {
        try (PreparedStatement ps = c.prepareStatement("select ? as v, ? as w")) {
          for (int i = 1; i <= 3; i++) {
            ps.setString(1, "r" + round + "é" + i);
            ps.setLong(2, 10L * round + i);
            try (ResultSet rs = ps.executeQuery()) {
              while (rs.next()) {
                System.out.println(rs.getString(1) + " " + rs.getLong(2));
              }
            }
          }
        }
      }
    }
  }
}
