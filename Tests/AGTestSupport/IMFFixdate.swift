import Foundation

/// RFC 9110 section 5.6.7's IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), read back with
/// Foundation's formatter: an independent check of the `Date` values the gateway writes.
public enum IMFFixdate {
    /// The Unix seconds `value` spells, or nil when it is not exactly an IMF-fixdate.
    public static func unixSeconds(_ value: String?) -> Int? {
        guard let value, value.utf8.count == 29 else { return nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: value), formatter.string(from: date) == value else { return nil }
        return Int(date.timeIntervalSince1970)
    }

    /// An IMF-fixdate within a few seconds of now.
    public static func isNow(_ value: String?) -> Bool {
        guard let seconds = unixSeconds(value) else { return false }
        return abs(seconds - Int(Date().timeIntervalSince1970)) <= 5
    }
}
