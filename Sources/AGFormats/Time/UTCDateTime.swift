/// A Unix time broken into its UTC calendar fields, and its RFC 3339 / ISO 8601 spelling.
///
/// Pure arithmetic (the proleptic Gregorian calendar, days counted from 1970-01-01), so the
/// hot paths that stamp responses and logs need neither Foundation's formatters nor `gmtime_r`.
public struct UTCDateTime: Sendable, Hashable {
    public let year: Int
    /// 1 … 12.
    public let month: Int
    /// 1 … 31.
    public let day: Int
    public let hour: Int
    public let minute: Int
    public let second: Int
    /// 0 … 999.
    public let millisecond: Int
    /// 0 (Sunday) … 6 (Saturday).
    public let weekday: Int

    /// The calendar fields of `unixMilliseconds` (negative times are before 1970).
    public init(unixMilliseconds: Int64) {
        let (days, inDay) = Self.floorDivide(unixMilliseconds, 86_400_000)
        let (year, month, day) = Self.civil(fromDays: days)
        self.year = year
        self.month = month
        self.day = day
        hour = Int(inDay / 3_600_000)
        minute = Int(inDay / 60_000 % 60)
        second = Int(inDay / 1000 % 60)
        millisecond = Int(inDay % 1000)
        // 1970-01-01 was a Thursday.
        weekday = Int(Self.floorDivide(days + 4, 7).1)
    }

    /// The calendar fields of `unixSeconds`.
    public init(unixSeconds: Int64) {
        self.init(unixMilliseconds: unixSeconds * 1000)
    }

    /// `2026-12-01T09:00:00Z`, or `2026-12-01T09:00:00.123Z` with `fractional`.
    public func iso8601(fractional: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        writeISO8601(fractional: fractional, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the `iso8601(fractional:)` spelling to `out`.
    public func writeISO8601(fractional: Bool, to out: inout [UInt8]) {
        Self.append(year, width: 4, to: &out)
        out.append(UInt8(ascii: "-"))
        Self.append(month, width: 2, to: &out)
        out.append(UInt8(ascii: "-"))
        Self.append(day, width: 2, to: &out)
        out.append(UInt8(ascii: "T"))
        appendTimeOfDay(to: &out)
        if fractional {
            out.append(UInt8(ascii: "."))
            Self.append(millisecond, width: 3, to: &out)
        }
        out.append(UInt8(ascii: "Z"))
    }

    /// Appends the IMF-fixdate spelling (RFC 9110 section 5.6.7), always 29 bytes for years
    /// 1000 … 9999: `Sun, 06 Nov 1994 08:49:37 GMT`.
    public func writeIMFFixdate(to out: inout [UInt8]) {
        let day = weekday * 3
        out.append(contentsOf: Self.dayNames.utf8.dropFirst(day).prefix(3))
        out.append(contentsOf: ", ".utf8)
        Self.append(self.day, width: 2, to: &out)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: Self.monthNames.utf8.dropFirst((month - 1) * 3).prefix(3))
        out.append(UInt8(ascii: " "))
        Self.append(year, width: 4, to: &out)
        out.append(UInt8(ascii: " "))
        appendTimeOfDay(to: &out)
        out.append(contentsOf: " GMT".utf8)
    }

    /// `hh:mm:ss`, as both spellings write it.
    private func appendTimeOfDay(to out: inout [UInt8]) {
        Self.append(hour, width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        Self.append(minute, width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        Self.append(second, width: 2, to: &out)
    }

    private static let dayNames = "SunMonTueWedThuFriSat"
    private static let monthNames = "JanFebMarAprMayJunJulAugSepOctNovDec"

    /// `YYYYMM`, the month key of the monthly-active-device counters.
    public var monthKey: String {
        var out: [UInt8] = []
        Self.append(year, width: 4, to: &out)
        Self.append(month, width: 2, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Year, month and day of the day `days` after 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`: eras of 400 years, each 146,097 days).
    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value >= 0 ? value / divisor : (value - divisor + 1) / divisor
        return (quotient, value - quotient * divisor)
    }

    private static func append(_ value: Int, width: Int, to out: inout [UInt8]) {
        DecimalDigits.append(value, width: width, to: &out)
    }
}
