// Runs several of Kafka's command line tools in one JVM, one after the other, as if each
// were started on its own: its own standard output and error, and the status it would
// exit with. Kafka's tools end through org.apache.kafka.common.utils.Exit, which lets a
// caller replace the exit (Kafka's own tool tests do the same), so a JVM start (a second
// or more of CPU) is paid once per batch instead of once per command.
//
//   java -cp <kafka jars>:<classes> ToolBatch OUT_DIR < commands
//
// Each input line is one command: the main class, then its arguments, separated by tabs.
// For command i (from 0) the batch writes OUT_DIR/i.out, i.err and i.exit.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;

import org.apache.kafka.common.utils.Exit;

public final class ToolBatch {
    /** Thrown in place of the JVM exit a tool asks for. */
    static final class ExitRequested extends RuntimeException {
        ExitRequested(int status) {
            super("exit " + status, null, false, false);
        }
    }

    /** An output stream whose target changes between commands. System.out and err are
     *  set to one of these once, at the start: Scala's Console (what the core jar's tools
     *  print through) keeps the System.out it first saw, so swapping System.out for each
     *  command would not reach it. */
    static final class Switch extends OutputStream {
        volatile OutputStream target = OutputStream.nullOutputStream();

        @Override
        public void write(int b) throws IOException {
            target.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            target.write(b, off, len);
        }
    }

    static final Switch OUT = new Switch();
    static final Switch ERR = new Switch();
    // The status of the tool's first exit request: the JVM would have ended with it.
    static Integer firstExit;

    static void requestExit(int status) {
        if (firstExit == null) {
            firstExit = status;
            // A real JVM is gone now: what the tool's own catch blocks print after the
            // request is no part of its output.
            OUT.target = OutputStream.nullOutputStream();
            ERR.target = OutputStream.nullOutputStream();
        }
        throw new ExitRequested(status);
    }

    public static void main(String[] args) throws Exception {
        Path out = Paths.get(args[0]);
        Files.createDirectories(out);
        Exit.setExitProcedure((status, message) -> requestExit(status));
        Exit.setHaltProcedure((status, message) -> requestExit(status));
        PrintStream toolOut = new PrintStream(OUT, true, StandardCharsets.UTF_8);
        PrintStream toolErr = new PrintStream(ERR, true, StandardCharsets.UTF_8);
        System.setOut(toolOut);
        System.setErr(toolErr);
        BufferedReader commands = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        int index = 0;
        while ((line = commands.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] words = line.split("\t", -1);
            ByteArrayOutputStream stdout = new ByteArrayOutputStream();
            ByteArrayOutputStream stderr = new ByteArrayOutputStream();
            OUT.target = stdout;
            ERR.target = stderr;
            int status = run(words[0], Arrays.copyOfRange(words, 1, words.length), toolErr);
            toolOut.flush();
            toolErr.flush();
            OUT.target = OutputStream.nullOutputStream();
            ERR.target = OutputStream.nullOutputStream();
            Files.write(out.resolve(index + ".out"), stdout.toByteArray());
            Files.write(out.resolve(index + ".err"), stderr.toByteArray());
            Files.writeString(out.resolve(index + ".exit"), Integer.toString(status));
            index++;
        }
    }

    /** The status the tool's JVM would exit with: the first exit it requested, 0 when
     *  main returns, or 1 with the stack trace when main throws (as the JVM does). */
    static int run(String mainClass, String[] args, PrintStream err) {
        firstExit = null;
        try {
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args);
            return firstExit != null ? firstExit : 0;
        } catch (InvocationTargetException e) {
            if (firstExit != null) {
                return firstExit;
            }
            err.print("Exception in thread \"main\" ");
            e.getCause().printStackTrace(err);
            return 1;
        } catch (ReflectiveOperationException e) {
            e.printStackTrace(err);
            return 1;
        }
    }
}
