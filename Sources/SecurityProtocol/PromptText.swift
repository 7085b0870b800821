/// The rules for text a prompt shows that a program wrote (`localizedReason`, the cancel and fallback titles,
/// `kSecUseOperationPrompt`): the engine refuses such text with a character that could make the prompt say what it
/// does not (``unshowableCharacter(in:)``), and the prompt agent escapes the same characters visibly in every text
/// it shows (``displayed(_:limit:)``), whoever wrote it (an executable's path, an item's name, PAM's question).
///
/// The characters are the C0 controls (NUL, ESC, newline, …), DEL, the C1 controls, and the bidirectional
/// formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069): an `ESC[8m` hides the lines after
/// it on a terminal, a NUL ends pinentry's description, a newline draws a line of the program's choosing, and a
/// right-to-left override makes text read in another order than it is stored.
package enum PromptText {
    /// Whether `scalar` is one of the characters that may not reach a prompt raw.
    package static func isUnshowable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// The first unshowable character of `text` as `U+XXXX`, nil when there is none.
    package static func unshowableCharacter(in text: String) -> String? {
        text.unicodeScalars.first(where: isUnshowable).map(codePoint)
    }

    /// `text` as a prompt shows it: every unshowable character as `\u{1B}` (visible, never interpreted), and at most
    /// `limit` characters of the result, the rest cut off and marked with `…`.
    package static func displayed(_ text: String, limit: Int) -> String {
        var result = ""
        var count = 0
        for scalar in text.unicodeScalars {
            let shown =
                isUnshowable(scalar) ? "\\u{\(String(scalar.value, radix: 16, uppercase: true))}" : String(scalar)
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
                    "\(name) holds \(character), a control or bidirectional formatting character a prompt cannot show"
            }
        }
        return nil
    }
}
