/// Parsing of the configuration's duration and byte-size notations.
///
/// Durations are one integer and a unit: `250ms`, `30s`, `5m`, `1h`, `7d`. A bare number is
/// refused rather than read as seconds, because `timeout: 250` is as likely meant as milliseconds.
/// Sizes are a plain byte count or an integer with a binary unit: `64KiB`, `1MiB`, `1GiB`; decimal
/// units (`KB`, `MB`) are refused because they are routinely read both ways.
public enum ConfigUnits {
    public static let durationExamples = "250ms, 30s, 5m, 1h or 7d"
    public static let sizeExamples = "1048576, 64KiB, 1MiB or 1GiB"

    private static let durationUnits: [(suffix: String, milliseconds: Int64)] = [
        ("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000),
    ]

    private static let sizeUnits: [String: Int] = [
        "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
    ]

    /// `nil` when `text` is not `<digits><unit>` or overflows.
    public static func parseDuration(_ text: String) -> Duration? {
        let (digits, unit) = split(text)
        guard !digits.isEmpty, digits.count <= 15, let count = Int64(digits),
              let multiplier = durationUnits.first(where: { $0.suffix[...] == unit })?.milliseconds
        else { return nil }
        let (milliseconds, overflow) = count.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { return nil }
        return .milliseconds(milliseconds)
    }

    /// `nil` when `text` is neither a byte count nor `<digits><binary unit>`, or overflows.
    public static func parseByteSize(_ text: String) -> Int? {
        let (digits, unit) = split(text)
        guard !digits.isEmpty, digits.count <= 19, let count = Int(digits) else { return nil }
        guard !unit.isEmpty else { return count }
        guard let multiplier = sizeUnits[String(unit)] else { return nil }
        let (bytes, overflow) = count.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : bytes
    }

    private static func split(_ text: String) -> (digits: Substring, unit: Substring) {
        let digitsEnd = text.firstIndex { !("0"..."9").contains($0) } ?? text.endIndex
        return (text[..<digitsEnd], text[digitsEnd...])
    }
}
