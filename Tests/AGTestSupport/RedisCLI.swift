import Foundation

/// Runs a program to completion; returns its exit status and standard output (with standard
/// error merged in when `mergingErrors`, dropped otherwise).
public func runProgram(_ path: String, _ arguments: [String], mergingErrors: Bool = false) throws -> (status: Int32, output: Data) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = mergingErrors ? pipe : FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, data)
}

/// Runs `redis-cli` against a URL: an independent look at what the gateway stored.
public enum RedisCLI {
    @discardableResult
    public static func run(_ url: String, _ arguments: String...) throws -> String {
        try run(url, arguments)
    }

    public static func run(_ url: String, _ arguments: [String]) throws -> String {
        let output = try runProgram("/usr/bin/redis-cli", ["-u", url, "--no-auth-warning"] + arguments).output
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
