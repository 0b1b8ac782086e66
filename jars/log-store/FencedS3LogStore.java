package lakehouse.delta;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.delta.storage.S3SingleDriverLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Delta's S3 log store, fenced by the data root's writer lock.
 *
 * <p>Delta commits version N of a table by creating {@code _delta_log/N.json}; two
 * writers must never both succeed. Delta's {@link S3SingleDriverLogStore} only
 * guarantees that within one JVM (a lock, then "exists?", then a PUT). Across
 * processes the project's writer lock (src/lakehouse/runtime/locks.py) serialises
 * writers, but a writer paused longer than its lease (a GC pause, SIGSTOP, a
 * suspended VM) resumes while another one holds the lock. So before each
 * commit this store checks that the lock object still names this writer
 * (its token) and that the lease has not expired, and fails the commit
 * otherwise; and it creates {@code N.json} with a conditional PUT
 * ({@code If-None-Match: *}, Hadoop's {@code fs.option.create.conditional.overwrite}),
 * so that even a writer paused between the check and the PUT cannot replace a
 * commit another writer made: it gets Delta's usual "version already exists"
 * and re-checks the lock before its retry.
 *
 * <p>The lock's URI and this writer's token come from the Hadoop configuration
 * ({@code lakehouse.writer.lock}, {@code lakehouse.writer.token}), which Spark
 * fills from the session's settings (src/lakehouse/runtime/spark.py sets them while a command
 * holds the lock). Without them (a session outside the lakehouse commands) it
 * behaves as its parent, with the conditional PUT.
 */
public class FencedS3LogStore extends S3SingleDriverLogStore {

    public static final String LOCK = "lakehouse.writer.lock";
    public static final String HOLDER = "lakehouse.writer.token";
    private static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";
    private static final int READ_ATTEMPTS = 4;
    private static final Pattern TOKEN_FIELD = Pattern.compile("\"token\"\\s*:\\s*\"([^\"]*)\"");
    private static final Pattern LEASE_FIELD =
        Pattern.compile("\"lease_until\"\\s*:\\s*([0-9.eE+-]+)");

    public FencedS3LogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(
            Path path,
            Iterator<String> actions,
            Boolean overwrite,
            Configuration hadoopConf) throws IOException {
        checkLease(hadoopConf);
        if (overwrite) {
            super.write(path, actions, overwrite, hadoopConf);
            return;
        }
        final FileSystem fs = path.getFileSystem(hadoopConf);
        // Raw builder types in Hadoop's API: build() is typed Object.
        try (FSDataOutputStream out = (FSDataOutputStream)
                fs.createFile(path).overwrite(false).must(CONDITIONAL_CREATE, true).build()) {
            while (actions.hasNext()) {
                out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
            throw new java.nio.file.FileAlreadyExistsException(path.toString());
        } catch (IOException e) {
            if (preconditionFailed(e)) {
                throw new java.nio.file.FileAlreadyExistsException(path.toString());
            }
            throw e;
        }
    }

    /** S3's 412 answer to a conditional PUT whose object exists (S3A's translation of it). */
    private static boolean preconditionFailed(Throwable error) {
        for (Throwable e = error; e != null; e = e.getCause()) {
            final String text = e.getClass().getSimpleName() + " " + e.getMessage();
            if (text.contains("RemoteFileChanged") || text.contains("PreconditionFailed")
                    || text.contains("412")) {
                return true;
            }
        }
        return false;
    }

    /** Fails unless the writer lock still names this writer and its lease runs. */
    static void checkLease(Configuration conf) throws IOException {
        final String lock = conf.get(LOCK);
        final String token = conf.get(HOLDER);
        if (lock == null || lock.isEmpty() || token == null || token.isEmpty()) {
            return;
        }
        final String body;
        try {
            body = readLock(new Path(lock), conf);
        } catch (FileNotFoundException e) {
            throw lost(lock, "the lock object is gone: another writer took it and released it");
        }
        final Matcher holder = TOKEN_FIELD.matcher(body);
        if (!holder.find() || !holder.group(1).equals(token)) {
            throw lost(lock, "another writer holds it now");
        }
        final Matcher lease = LEASE_FIELD.matcher(body);
        final double until = lease.find() ? Double.parseDouble(lease.group(1)) : 0;
        if (until * 1000 < System.currentTimeMillis()) {
            throw lost(lock, "its lease expired and was not renewed");
        }
    }

    /**
     * The lock object's content, read again when it changed while it was read. S3A
     * opens an object with the ETag its HEAD saw and reads it with that ETag as a
     * condition: when the holder's own lease renewal (a PUT every third of the lease)
     * lands between the two, S3 answers 412 (Precondition Failed), which is no news
     * about the lock: it is read again, a little later each time. Another answer, or
     * a fourth 412 in a row, fails the commit.
     */
    private static String readLock(Path path, Configuration conf) throws IOException {
        for (int attempt = 1; ; attempt++) {
            try (FSDataInputStream in = path.getFileSystem(conf).open(path)) {
                return new String(in.readAllBytes(), StandardCharsets.UTF_8);
            } catch (FileNotFoundException e) {
                throw e;
            } catch (IOException e) {
                if (attempt == READ_ATTEMPTS || !preconditionFailed(e)) {
                    throw e;
                }
            }
            try {
                Thread.sleep(50L * attempt);  // the renewal's PUT may still be landing
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("interrupted reading " + path);
            }
        }
    }

    private static IOException lost(String lock, String why) {
        return new IOException(
            "lakehouse: this writer lost the data root's writer lock " + lock + " (" + why
            + "; it was paused longer than its lease?): it stops before committing. "
            + "Nothing it had not committed before is in the tables; run the command again.");
    }
}
