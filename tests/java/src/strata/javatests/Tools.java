package strata.javatests;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * Kafka's command-line tools, run one after another in this JVM: each line of stdin names a tool's main
 * class and its arguments, tab-separated, and each answer is a line of stdout after {@link Clients#ANSWER}:
 * {"code": the exit code, "stdout": ..., "stderr": ...}. The tools end through Kafka's {@code Exit}, whose
 * procedure here throws {@link ToolExit} with the code instead of ending the JVM; an exception out of main
 * is exit code 1 with its stack trace on stderr, as the JVM would give. Spares each run the JVM's start and
 * the loading of Kafka's classes. A tool that catches every Throwable catches that exit too: its exit code
 * stays the one a JVM would give, but its stderr may hold an extra message.
 */
public final class Tools {
    private Tools() {}

    /** A tool's call of Exit.exit or Exit.halt. */
    static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((code, message) -> {
            throw new ToolExit(code);
        });
        Exit.setHaltProcedure((code, message) -> {
            throw new ToolExit(code);
        });
        Clients.serve(Tools::runCaptured);
        System.exit(0);
    }

    /** One tool run, {@code parts[0]} its main class: its exit code and what it printed. */
    private static Object runCaptured(String[] parts) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream toolOut = new ByteArrayOutputStream();
        ByteArrayOutputStream toolErr = new ByteArrayOutputStream();
        System.setOut(new PrintStream(toolOut, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(toolErr, true, StandardCharsets.UTF_8));
        int code;
        try {
            code = run(parts[0], Arrays.copyOfRange(parts, 1, parts.length));
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("no tool " + parts[0], e);  // ends the serving JVM, as before
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(out);
            System.setErr(err);
        }
        Map<String, Object> answer = new LinkedHashMap<>();
        answer.put("code", code);
        answer.put("stdout", toolOut.toString(StandardCharsets.UTF_8));
        answer.put("stderr", toolErr.toString(StandardCharsets.UTF_8));
        return answer;
    }

    private static int run(String mainClass, String[] args) throws ReflectiveOperationException {
        try {
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof ToolExit exit) {
                return exit.code;
            }
            StringWriter trace = new StringWriter();
            cause.printStackTrace(new PrintWriter(trace));
            System.err.print("Exception in thread \"main\" " + trace);
            return 1;
        }
    }
}
