import AGTestSupport
import AGYAML
import Foundation

/// The configuration keys the documentation promises: the README's two configuration tables
/// (`### gateway.yaml`, `### tenants/<name>.yaml`), cross-checked with the keys the shipped
/// `conf/` files set. Gateway keys are written `gateway:<path>`, tenant keys `tenant:<path>`;
/// map entries chosen by the operator read `<name>` (`tiers.<name>.api`), list items `[]`.
enum ConfigKeyCatalog {
    static var root: String {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
        }
        return "."
    }

    /// Every key of the README's configuration tables.
    static func documented() throws -> Set<String> {
        let readme = try TestFile.text(root + "/README.md")
        var keys = Set<String>()
        var file: String?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#") {
                file = line == "### gateway.yaml" ? "gateway" : line == "### tenants/<name>.yaml" ? "tenant" : nil
                continue
            }
            guard let file, line.hasPrefix("| `") else { continue }
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            var parent = ""
            for spelled in backticked(String(cell)) {
                // `app_attest.root_ca`, `test_ca`: a bare name continues the previous parent.
                let full = spelled.contains(".") || parent.isEmpty ? spelled : parent + "." + spelled
                for key in expand(full) { keys.insert(file + ":" + key) }
                parent = full.split(separator: ".").dropLast().joined(separator: ".")
            }
        }
        return keys
    }

    /// The keys the shipped files set (comments aside), in the catalog's spelling.
    static func shipped() throws -> Set<String> {
        var keys = Set<String>()
        for (file, path) in [("gateway", "conf/gateway.yaml"), ("tenant", "conf/tenants/example.yaml")] {
            let text = try TestFile.text(root + "/" + path)
            guard let node = try YAMLReader.parse(text, file: path) else { continue }
            collect(node, prefix: "", into: &keys, file: file)
        }
        return keys
    }

    private static func collect(_ node: YAMLNode, prefix: String, into keys: inout Set<String>, file: String) {
        switch node.content {
        case .mapping(let entries):
            for entry in entries {
                // Tier names and claim-to-header maps are the operator's own names.
                let name = prefix == "tiers" ? "<name>" : entry.key
                let path = prefix.isEmpty ? name : prefix + "." + name
                if prefix == "custom_claims" || prefix == "forward.claims" { continue }
                collect(entry.value, prefix: path, into: &keys, file: file)
            }
            if entries.isEmpty || prefix == "custom_claims" || prefix == "forward.claims" { keys.insert(file + ":" + prefix) }
        case .sequence(let items):
            if items.contains(where: { if case .mapping = $0.content { true } else { false } }) {
                for item in items { collect(item, prefix: prefix + "[]", into: &keys, file: file) }
            } else {
                keys.insert(file + ":" + prefix)
            }
        case .scalar:
            keys.insert(file + ":" + prefix)
        }
    }

    /// The backticked spans of a table cell.
    static func backticked(_ cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// `a.{b,c}.d` → `a.b.d`, `a.c.d` (one brace group).
    static func expand(_ key: String) -> [String] {
        guard let open = key.firstIndex(of: "{"), let close = key[open...].firstIndex(of: "}") else { return [key] }
        let head = key[..<open], tail = key[key.index(after: close)...]
        return key[key.index(after: open)..<close].split(separator: ",").map { String(head + $0 + tail) }
    }
}
