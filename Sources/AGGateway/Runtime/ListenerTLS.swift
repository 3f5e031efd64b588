import AGConfig
import AGCrypto
import AGSync

/// The TLS context the public listener gives each new connection: the one the gateway started
/// with, replaced by every reload that loads a new certificate. Connections already open keep
/// the context they were accepted with (their `SSL` holds it), so rotation drops none.
///
/// Whether the listener speaks TLS at all is fixed at startup (a reload that adds or removes
/// `server.tls` is logged as needing a restart): a typo in a reload must never turn an https
/// port into a plain one.
final class ListenerTLS: Sendable {
    private let current: Locked<TLSServerContext>

    init(_ context: TLSServerContext) {
        current = Locked(context)
    }

    /// Read once per accepted connection (an uncontended lock, not per request).
    var context: TLSServerContext { current.withLock { $0 } }

    func replace(_ context: TLSServerContext) {
        current.withLock { $0 = context }
    }
}

extension TLSServerContext {
    /// The listener's context from `server.tls`; a file that does not parse, or a key that does
    /// not match the certificate, is reported at its key in `gateway.yaml`.
    static func load(_ files: TLSFiles) throws(ConfigError) -> TLSServerContext {
        do {
            return try TLSServerContext(certificateChainFile: files.certificateFile, privateKeyFile: files.keyFile)
        } catch {
            let problem = switch error.input {
            case .privateKey: files.keyLocation.problem("private key \"\(files.keyFile)\": \(error.reason)")
            default: files.certificateLocation.problem("certificate chain \"\(files.certificateFile)\": \(error.reason)")
            }
            throw ConfigError(problems: [problem])
        }
    }

    /// Logs which certificate is served, and loudly when it has expired or expires within 14 days.
    func logLoaded(_ logger: Logger, files: TLSFiles, now: Int64) {
        let fields: [(String, LogValue)] = [("subject", .string(certificateSubject)), ("file", .string(files.certificateFile)),
                                            ("notAfter", .int(Int(certificateNotAfter)))]
        if certificateNotAfter <= now {
            logger.error("TLS certificate has expired: clients will refuse it", fields)
        } else if certificateNotAfter - now < 14 * 86_400 {
            logger.warn("TLS certificate expires within 14 days", fields + [("days", .int(Int((certificateNotAfter - now) / 86_400)))])
        } else {
            logger.info("TLS certificate loaded", fields)
        }
    }
}
