import Foundation

/// Runs `redis-cli` against a URL: an independent look at what the gateway stored.
public enum RedisCLI {
    @discardableResult
    public static func run(_ url: String, _ arguments: String...) throws -> String {
        try run(url, arguments)
    }

    public static func run(_ url: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
        process.arguments = ["-u", url, "--no-auth-warning"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
