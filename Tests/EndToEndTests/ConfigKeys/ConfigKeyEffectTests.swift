import AGTestSupport
import Foundation
import Testing

/// Issue 9 item 1: every documented configuration key has an observable runtime effect, or is
/// refused at startup with `file:line` — never accepted and ignored. The table
/// (`ConfigKeyEffects`) is held to the documentation both ways: a key documented without a
/// check, or checked without being documented, fails here. Serialized: several checks time
/// their answers, and a crowded machine would blur them.
@Suite("configuration keys: each has its effect or is refused", .serialized, .onOwnThreads)
struct ConfigKeyEffectTests {
    @Test func theTableCoversExactlyTheDocumentedKeys() throws {
        let documented = try ConfigKeyCatalog.documented()
        let checked = Set(ConfigKeyEffects.all.map(\.key))
        #expect(documented.count > 50, "the README tables were found: \(documented.sorted())")
        #expect(documented.subtracting(checked).sorted() == [], "documented keys without a check")
        #expect(checked.subtracting(documented).sorted() == [], "checked keys the README does not document")
        #expect(ConfigKeyEffects.all.count == checked.count, "one check per key")
    }

    @Test func theShippedFilesSetOnlyDocumentedKeys() throws {
        let shipped = try ConfigKeyCatalog.shipped()
        #expect(shipped.count > 30, "\(shipped.sorted())")
        #expect(shipped.subtracting(try ConfigKeyCatalog.documented()).sorted() == [])
    }

    @Test(arguments: ConfigKeyEffects.all)
    func keyHasItsEffect(_ effect: KeyEffect) async throws {
        try await effect.check()
    }
}
