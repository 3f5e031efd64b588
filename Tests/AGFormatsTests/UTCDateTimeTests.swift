import AGFormats
import Foundation
import Testing

@Suite("UTC calendar fields and ISO 8601")
struct UTCDateTimeTests {
    @Test("known instants", arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z", "197001"),
        (Int64(951_782_400_000), "2000-02-29T00:00:00.000Z", "200002"),
        (Int64(1_796_022_230_123), "2026-11-30T07:03:50.123Z", "202611"),
        (Int64(4_102_444_799_999), "2099-12-31T23:59:59.999Z", "209912"),
        (Int64(-1), "1969-12-31T23:59:59.999Z", "196912"),
    ])
    func knownInstants(milliseconds: Int64, iso: String, month: String) {
        let time = UTCDateTime(unixMilliseconds: milliseconds)
        #expect(time.iso8601(fractional: true) == iso)
        #expect(time.iso8601() == String(iso.prefix(19)) + "Z")
        #expect(time.monthKey == month)
    }

    @Test("agrees with Foundation's calendar on every day from 1900 to 2200")
    func agreesWithFoundation() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var seconds = Int64(-2_208_988_800)
        while seconds < 7_258_118_400 {
            let ours = UTCDateTime(unixSeconds: seconds + 45_296)
            let theirs = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second],
                                                 from: Date(timeIntervalSince1970: Double(seconds + 45_296)))
            #expect(ours.year == theirs.year && ours.month == theirs.month && ours.day == theirs.day)
            #expect(ours.hour == 12 && ours.minute == 34 && ours.second == 56)
            seconds += 86_400
            if ours.year != theirs.year || ours.month != theirs.month || ours.day != theirs.day { break }
        }
    }
}

@Suite("IMF-fixdate (RFC 9110 section 5.6.7)")
struct IMFFixdateTests {
    @Test("known instants", arguments: [
        (Int64(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT"),
        (Int64(0), "Thu, 01 Jan 1970 00:00:00 GMT"),
        (Int64(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT"),
        (Int64(1_796_022_230), "Mon, 30 Nov 2026 07:03:50 GMT"),
        (Int64(4_102_444_799), "Thu, 31 Dec 2099 23:59:59 GMT"),
        (Int64(-1), "Wed, 31 Dec 1969 23:59:59 GMT"),
    ])
    func knownInstants(seconds: Int64, text: String) {
        var out: [UInt8] = []
        UTCDateTime(unixSeconds: seconds).writeIMFFixdate(to: &out)
        #expect(String(decoding: out, as: UTF8.self) == text)
        #expect(out.count == 29)
    }

    @Test("weekday and month names agree with Foundation on every day of 2000 to 2030")
    func agreesWithFoundation() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var seconds = Int64(946_684_800 + 3_723)
        while seconds < 1_893_456_000 {
            var out: [UInt8] = []
            UTCDateTime(unixSeconds: seconds).writeIMFFixdate(to: &out)
            let theirs = formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))
            #expect(String(decoding: out, as: UTF8.self) == theirs)
            if String(decoding: out, as: UTF8.self) != theirs { break }
            seconds += 86_400
        }
    }
}
