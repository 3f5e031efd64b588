#if canImport(Glibc)
import Glibc
#endif

/// Reads files for tests with plain POSIX `open`/`read`, never through Foundation.
///
/// Why: swift-corelibs-foundation's `readBytesFromFile` (behind `String(contentsOfFile:)`,
/// `Data(contentsOf:)` and `FileManager.contents(atPath:)`) leaks its read buffer when the file
/// is empty, and the suite keeps reading logs that are still empty, port files not yet written
/// and `/proc` files (whose size is reported as 0). Under `scripts/test --sanitize=address`
/// LeakSanitizer reported each of those at exit. The gateway's own config reads avoid the same
/// path (`ConfigFiles.read`); this is the tests' equivalent.
public enum TestFile {
    /// A file that could not be opened or read, with `errno`'s text.
    public struct Unreadable: Error, CustomStringConvertible {
        public let path: String
        public let code: Int32
        public var description: String { "\(path): \(String(cString: strerror(code)))" }
    }

    /// Every byte of `path`, read until end of file (so `/proc` files, which claim size 0,
    /// are read whole).
    public static func bytes(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Unreadable(path: path, code: errno) }
        defer { close(descriptor) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return result }
            if count < 0 {
                if errno == EINTR { continue }
                throw Unreadable(path: path, code: errno)
            }
            result.append(contentsOf: chunk[..<count])
        }
    }

    /// The file as UTF-8 text (invalid bytes repaired, which no test relies on).
    public static func text(_ path: String) throws -> String {
        String(decoding: try bytes(path), as: UTF8.self)
    }

    /// The file's text, or `""` when it does not exist (yet) or cannot be read: for logs and
    /// files another process writes later.
    public static func textIfReadable(_ path: String) -> String {
        (try? text(path)) ?? ""
    }
}
