// A Java client's view of the certificates role's trust stores (run by verify.yml with
// Java 11+ as a single source file: java TrustProbe.java ...).
//
//   java TrustProbe.java HOST PORT PASSWORD STORE...
//
// For each STORE (truststore.jks or truststore.p12; the type comes from the file name),
// one TLS handshake to HOST:PORT trusting that store alone, with HTTPS endpoint
// identification, so the server's certificate must chain to the cluster CA and name
// HOST among its SANs. Then one handshake with the JDK's own trust (cacerts), which must
// fail: the stores, not the JDK, make the server trusted. Prints one line per handshake;
// exits 1 when any result differs from the expectation.
import java.io.FileInputStream;
import java.io.InputStream;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.util.Collections;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;

public class TrustProbe {
    private static String handshake(SSLContext context, String host, int port) throws Exception {
        try (SSLSocket socket = (SSLSocket) context.getSocketFactory().createSocket(host, port)) {
            socket.setSoTimeout(20000);
            SSLParameters parameters = socket.getSSLParameters();
            parameters.setEndpointIdentificationAlgorithm("HTTPS");
            socket.setSSLParameters(parameters);
            socket.startHandshake();
            X509Certificate peer = (X509Certificate) socket.getSession().getPeerCertificates()[0];
            return peer.getSubjectX500Principal().getName() + " serial " + peer.getSerialNumber().toString(16);
        }
    }

    private static SSLContext trusting(String path, String password) throws Exception {
        String type = path.endsWith(".jks") ? "JKS" : "PKCS12";
        KeyStore store = KeyStore.getInstance(type);
        try (InputStream in = new FileInputStream(path)) {
            store.load(in, password.toCharArray());
        }
        int trusted = 0;
        for (String alias : Collections.list(store.aliases())) {
            if (store.isCertificateEntry(alias)) {
                trusted++;
            }
        }
        if (trusted == 0) {
            throw new IllegalStateException(path + " holds no trusted certificate entry");
        }
        TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        factory.init(store);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, factory.getTrustManagers(), null);
        return context;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: java TrustProbe.java HOST PORT PASSWORD STORE...");
            System.exit(2);
        }
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        boolean ok = true;
        for (int i = 3; i < args.length; i++) {
            try {
                System.out.println("trusted with " + args[i] + ": " + handshake(trusting(args[i], args[2]), host, port));
            } catch (Exception e) {
                System.out.println("FAILED with " + args[i] + ": " + e);
                ok = false;
            }
        }
        try {
            handshake(SSLContext.getDefault(), host, port);
            System.out.println("FAILED: the JDK's own trust accepted the server too");
            ok = false;
        } catch (javax.net.ssl.SSLHandshakeException e) {
            System.out.println("refused with the JDK's own trust: " + e.getMessage());
        }
        System.exit(ok ? 0 : 1);
    }
}
