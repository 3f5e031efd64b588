import AGFuzzTargets
import AGTestSupport
import Foundation
import Testing

/// Every fuzz target over its seeds and every input kept under `Tests/Fixtures/fuzz/<target>/`
/// (crashers the fuzzers found, fixed since): each promise must hold for each of them.
@Suite("fuzz targets: seeds and kept crashers")
struct FuzzReplayTests {
    static var fixtures: String {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
                return url.appendingPathComponent("Tests/Fixtures/fuzz").path
            }
        }
        return "Tests/Fixtures/fuzz"
    }

    @Test(arguments: FuzzTargets.all.map(\.name))
    func replays(name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        let seeds = target.seeds()
        #expect(!seeds.isEmpty)
        for (index, seed) in seeds.enumerated() {
            #expect(target.run(seed) == nil, "\(name) seed \(index)")
        }
        let directory = Self.fixtures + "/" + name
        let kept = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for file in kept.sorted() {
            let input = try TestFile.bytes(directory + "/" + file)
            #expect(target.run(input) == nil, "\(name) \(file)")
        }
    }

    @Test func everyTargetHasAUniqueName() {
        let names = FuzzTargets.all.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(names.count == 14)
    }
}
