extension Character {
    /// `0`–`9` only: `isNumber` alone also accepts other scripts' digits and fractions.
    public var isASCIIDigit: Bool { isASCII && isNumber }

    /// Printable ASCII other than space (`!` to `~`), the characters allowed in paths as written.
    public var isVisibleASCII: Bool { asciiValue.map { $0 > 0x20 && $0 < 0x7F } ?? false }
}
