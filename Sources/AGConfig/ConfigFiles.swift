import FoundationEssentials
import Glibc

/// The loader's only contact with the file system: reading files, listing a directory and
/// checking that files referenced by the configuration can be opened later.
public enum ConfigFiles {
    /// Configuration files larger than this are refused before parsing.
    public static let maximumFileBytes = 4 << 20

    /// Joins `path` to `directory` unless it is absolute; `directory` may be empty or `.`.
    public static func resolve(_ path: String, against directory: String) -> String {
        if path.hasPrefix("/") || directory.isEmpty || directory == "." { return path }
        return directory.hasSuffix("/") ? directory + path : directory + "/" + path
    }

    /// The directory part of `path` (`.` for a bare file name).
    public static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// The last path component without its extension.
    public static func stem(of path: String) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return name }
        return String(name[..<dot])
    }

    public static func isDirectory(_ path: String) -> Bool {
        var isDirectory = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory
    }

    /// Why `path` cannot be read as a regular file, or `nil` when it can.
    public static func unreadableReason(_ path: String) -> String? {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return "does not exist"
        }
        if isDirectory { return "is a directory" }
        if !FileManager.default.isReadableFile(atPath: path) { return "is not readable (permission denied)" }
        return nil
    }

    /// The bytes of a configuration file, or why it cannot be read.
    public static func read(_ path: String) -> Result<[UInt8], FileProblem> {
        if let reason = unreadableReason(path) { return .failure(FileProblem(reason: reason)) }
        // An empty file is answered without reading it: Foundation's read of a zero-length
        // file leaks its 4 KiB buffer (found by the config-gateway fuzz target under
        // LeakSanitizer), and an editor that truncates before writing makes the tenants
        // watcher reload exactly such files.
        if version(of: path)?.size == 0 { return .success([]) }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(FileProblem(reason: "could not be read"))
        }
        guard data.count <= maximumFileBytes else {
            return .failure(FileProblem(reason: "is larger than \(maximumFileBytes >> 20) MiB"))
        }
        return .success([UInt8](data))
    }

    /// A file as `stat(2)` finds it through symlinks: which file (device and inode: a rename
    /// into place is another file), its size, and its modification and status-change times
    /// (`cp -p` and `rsync -t` keep the first, nothing keeps the second). Through symlinks,
    /// because a Kubernetes ConfigMap mounts each file as a link through `..data`, and an update
    /// repoints `..data`: the links themselves never change.
    public struct FileVersion: Hashable, Sendable {
        public var device: UInt64 = 0
        public var inode: UInt64 = 0
        public var size: Int64 = -1
        public var modified: Int64 = 0
        public var changed: Int64 = 0

        /// What stands for a name `stat` cannot follow (a dangling link).
        public static let unreadable = FileVersion()
    }

    /// `path`'s version, or nil when `stat` cannot follow it. One system call:
    /// `FileManager.attributesOfItem` made ~14 per file (owner and group names read from
    /// /etc/passwd and /etc/group) and did not follow links; a reload of 1,000 tenant files
    /// took ~175 ms instead of ~107, and the tenants watcher spent 3 % of a core.
    public static func version(of path: String) -> FileVersion? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return FileVersion(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
                           modified: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec),
                           changed: Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec))
    }

    /// Names of the `*.yaml`/`*.yml` entries of `directory`, sorted, hidden files (editor
    /// backups, lock files) skipped; or why the directory cannot be listed.
    public static func yamlFileNames(in directory: String) -> Result<[String], FileProblem> {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else {
            return .failure(FileProblem(reason: "does not exist"))
        }
        guard isDirectory else { return .failure(FileProblem(reason: "is not a directory")) }
        guard let entries = rawNames(in: directory) else {
            return .failure(FileProblem(reason: "cannot be listed (permission denied?)"))
        }
        return .success(entries.filter(isYAMLName).compactMap { String(validating: $0, as: UTF8.self) }.sorted())
    }

    /// The `*.yaml`/`*.yml` entries of `directory` whose names are not UTF-8 (`yamlFileNames`
    /// leaves them out), spelt with `\xNN` for the bytes that are not: Foundation's listing
    /// turned them into names that do not exist, and every reload failed with "does not exist".
    public static func nonUTF8YAMLNames(in directory: String) -> [String] {
        (rawNames(in: directory) ?? []).filter { isYAMLName($0) && String(validating: $0, as: UTF8.self) == nil }.map { bytes in
            bytes.map { $0 >= 0x20 && $0 < 0x7F ? String(UnicodeScalar($0)) : "\\x" + String($0, radix: 16, uppercase: true) }.joined()
        }.sorted()
    }

    private static func isYAMLName(_ name: [UInt8]) -> Bool {
        guard name.first != UInt8(ascii: "."), let dot = name.lastIndex(of: UInt8(ascii: ".")) else { return false }
        let suffix = name[(dot + 1)...]
        return suffix.elementsEqual("yaml".utf8) || suffix.elementsEqual("yml".utf8)
    }

    /// The entry names of `directory` as bytes (`.` and `..` left out), or nil.
    private static func rawNames(in directory: String) -> [[UInt8]]? {
        guard let stream = opendir(directory) else { return nil }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if name != [0x2E], name != [0x2E, 0x2E] { names.append(name) }
        }
        return names
    }

    /// Why a file or directory could not be used.
    public struct FileProblem: Error {
        public let reason: String
    }
}
