/// The rules for text a prompt shows that a program wrote (`localizedReason`, the cancel and fallback titles,
/// `kSecUseOperationPrompt`): the engine refuses such text with a character that could make the prompt say what it
/// does not (``unshowableCharacter(in:)``), and the prompt agent escapes the same characters visibly in every text
/// it shows (``displayed(_:limit:)``), whoever wrote it (an executable's path, an item's name, PAM's question).
///
/// The characters are the C0 controls (NUL, ESC, newline, …), DEL, the C1 controls, the line and paragraph
/// separators (U+2028, U+2029, which graphical toolkits break lines at) and the bidirectional formatting characters
/// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069): an `ESC[8m` hides the lines after it on a terminal, a
/// NUL ends pinentry's description, a newline or a line separator draws a line of the program's choosing, and a
/// right-to-left override makes text read in another order than it is stored. In the texts the daemon verified (a
/// program's path, its registration), every invisible character is escaped too (``displayed(_:limit:verified:)``).
package enum PromptText {
    /// Whether `scalar` is one of the characters that may not reach a prompt raw.
    package static func isUnshowable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// Whether `scalar` shows as nothing, or as a space other than the space, where a verified text must show every
    /// character it holds: format characters (zero-width spaces and joiners, U+FEFF, soft hyphens, tags), the
    /// default-ignorable ones, the other spaces, and the braille blank.
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        if isUnshowable(scalar) || scalar.properties.isDefaultIgnorableCodePoint { return true }
        switch scalar.properties.generalCategory {
        case .format: return true
        case .spaceSeparator: return scalar != " "
        default: return scalar.value == 0x2800
        }
    }

    /// The first unshowable character of `text` as `U+` and its hexadecimal code point (`U+001B`), nil when none.
    package static func unshowableCharacter(in text: String) -> String? {
        text.unicodeScalars.first(where: isUnshowable).map(codePoint)
    }

    /// `text` as a prompt shows it: every unshowable character as `\u{1B}` (visible, never interpreted), a
    /// backslash as `\\` (so that an escape cannot be faked), and at most `limit` characters of the result, the rest
    /// cut off and marked with `…`. A `verified` text (what the daemon found, not what a program wrote) also shows
    /// every hidden character escaped.
    package static func displayed(_ text: String, limit: Int, verified: Bool = false) -> String {
        var result = ""
        var count = 0
        for scalar in text.unicodeScalars {
            let escape = verified ? isHidden(scalar) : isUnshowable(scalar)
            let shown =
                scalar == "\\"
                ? "\\\\" : escape ? "\\u{\(String(scalar.value, radix: 16, uppercase: true))}" : String(scalar)
            guard count + shown.unicodeScalars.count <= limit else { return result + "\u{2026}" }
            result += shown
            count += shown.unicodeScalars.count
        }
        return result
    }

    static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let digits = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

extension EvaluationPrompt {
    /// Why the prompt's texts cannot be shown as they are — which text, and its first unshowable character
    /// (``PromptText``) — or nil when they can. Names the character, never repeats the text.
    package var unshowableText: String? {
        let texts: [(String, String?)] = [
            ("the reason", reason), ("the fallback title", fallbackTitle), ("the cancel title", cancelTitle),
        ]
        for case (let name, let text?) in texts {
            if let character = PromptText.unshowableCharacter(in: text) {
                return
                    "\(name) holds \(character), a control, line-breaking or bidirectional formatting character a prompt cannot show"
            }
        }
        return nil
    }
}
