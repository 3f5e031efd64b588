extension Character {
    /// `0`–`9` only: `isNumber` alone also accepts other scripts' digits and fractions.
    var isASCIIDigit: Bool { isASCII && isNumber }
}
