#if canImport(Glibc)
import Glibc
#endif
import Foundation
import AGSync

/// The real `attestgate serve` binary on a config directory, for tests that need a separate
/// process: signals, exit codes, and memory measured apart from the test's own.
public final class GatewayProcess: Sendable {
    private let process: Process
    /// stderr's pipe, read to its end by a thread of its own (`readToEnd`).
    private let errors = Pipe()
    private let output = CapturedOutput()
    /// stdout's pipe (the access log), read the same way.
    private let access = Pipe()
    private let accessOutput = CapturedOutput()
    public let port: Int
    public let adminPort: Int

    public enum Failure: Error, CustomStringConvertible {
        case didNotStart(String)
        public var description: String {
            switch self {
            case .didNotStart(let log): "gateway did not report its port: \(log)"
            }
        }
    }

    /// `descriptorLimit` starts the gateway under that `RLIMIT_NOFILE` (through `prlimit`);
    /// `environment` is added to the inherited one (`TestBuild.memoryMeasurementEnvironment`).
    public init(configPath: String, descriptorLimit: Int? = nil, environment: [String: String] = [:]) throws {
        let process = Process()
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, added in added }
        }
        let binary = TestGateway.builtProductPath("attestgate")
        if let descriptorLimit {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
            process.arguments = ["--nofile=\(descriptorLimit):\(descriptorLimit)", "--", binary, "serve", "--config", configPath]
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["serve", "--config", configPath]
        }
        let errors = self.errors
        process.standardError = errors
        process.standardOutput = access
        let output = self.output
        try process.run()
        Self.readToEnd(errors, into: output)
        Self.readToEnd(access, into: accessOutput)
        self.process = process
        var port = 0
        var adminPort = 0
        _ = eventually(10) {
            let log = output.text.withLock { $0 }
            // The "attestgate serving" line, in JSON or (log.format: text) as key=value (a text
            // line's admin port unread made every text-format start wait out the whole 10 s).
            if let range = log.range(of: #""listen":"127.0.0.1:(\d+)""#, options: .regularExpression)
                ?? log.range(of: #"listen=127\.0\.0\.1:(\d+) "#, options: .regularExpression) {
                port = Int(log[range].split(separator: ":").last!.dropLast()) ?? 0
            }
            if let range = log.range(of: #""admin":"127.0.0.1:(\d+)""#, options: .regularExpression)
                ?? log.range(of: #"admin=127\.0\.0\.1:(\d+) "#, options: .regularExpression) {
                adminPort = Int(log[range].split(separator: ":").last!.dropLast()) ?? 0
            }
            return port > 0 && adminPort > 0
        }
        guard port > 0 else {
            process.terminate()
            throw Failure.didNotStart(output.text.withLock { $0 })
        }
        self.port = port
        self.adminPort = adminPort
    }

    /// Kills a gateway still running and reaps it; its end of stderr then ends the reader.
    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Appends what the gateway writes to stderr to `output`, on a thread that blocks in `read`
    /// until the pipe's end (the gateway's exit) and holds the pipe open until then. Not
    /// Foundation's `readabilityHandler`, a dispatch source on the pipe: the test process crashed
    /// once in libdispatch's event loop (`_dispatch_event_loop_drain`, a bad pointer) while the
    /// reload tests started and dropped gateways, and that source was the test support's one
    /// dispatch source (the likely cause, not a proven one); left installed it also kept the
    /// file handle, the pipe and the `Process` alive for good.
    private static func readToEnd(_ pipe: Pipe, into output: CapturedOutput) {
        let reader = Thread {
            let descriptor = pipe.fileHandleForReading.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count > 0 {
                    output.text.withLock { $0 += String(decoding: buffer[..<count], as: UTF8.self) }
                } else if count < 0, errno == EINTR {
                    continue
                } else {
                    break
                }
            }
        }
        reader.start()
    }

    /// The process id (for /proc).
    public var processIdentifier: Int32 { process.processIdentifier }

    /// Everything the gateway wrote to stderr so far.
    public var log: String { output.text.withLock { $0 } }

    /// Everything the gateway wrote to stdout (its access log) so far.
    public var accessLog: String { accessOutput.text.withLock { $0 } }

    public func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Whether the process has not exited yet.
    public var isRunning: Bool { process.isRunning }

    /// Waits for the process to end; its exit status.
    public func waitForExit() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// CPU time (user + system) the process has used so far, from /proc/PID/stat.
    public func cpuSeconds() -> Double {
        guard let stat = try? TestFile.text("/proc/\(process.processIdentifier)/stat"),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime and stime are fields 14 and 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident set size in bytes (`VmRSS` of /proc/PID/status).
    public func residentBytes() -> Int {
        guard let status = try? TestFile.text("/proc/\(process.processIdentifier)/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else {
            return 0
        }
        return kilobytes * 1024
    }
}

/// What a child process wrote, appended from the pipe's reader thread.
private final class CapturedOutput: Sendable {
    let text = Locked("")
}
