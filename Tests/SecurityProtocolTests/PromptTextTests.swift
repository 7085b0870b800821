import SecurityProtocol
import Testing

/// What a prompt may show of a text a program wrote, and how the agent shows what it may not (issue 47, attack 4).
@Suite("Prompt texts")
struct PromptTextTests {
    /// Refused in a reason: controls, DEL, C1, the line and paragraph separators graphical toolkits break lines at,
    /// and bidirectional formatting; accepted: letters of any script, the no-break spaces French text uses, emoji.
    @Test func whatAReasonMayHold() {
        for refused in [
            "a\u{0}b", "\u{1B}[8m", "line\nline", "\u{7F}", "\u{85}", "a\u{2028}b", "a\u{2029}b", "\u{202E}x",
        ] {
            #expect(PromptText.unshowableCharacter(in: refused) != nil, "\(refused.unicodeScalars.map(\.value))")
        }
        for accepted in ["Signer le contrat\u{202F}?", "prix\u{A0}: 3\u{A0}€", "ログイン", "deploy 🚀", "👩‍💻 build"] {
            #expect(PromptText.unshowableCharacter(in: accepted) == nil, "\(accepted)")
        }
        #expect(PromptText.unshowableCharacter(in: "x\u{2028}y") == "U+2028")
    }

    /// Every unshowable character appears as an escape, a backslash as two, so that `\u{A}` written by a program
    /// cannot pass for an escaped newline.
    @Test func anEscapeCannotBeFaked() {
        #expect(PromptText.displayed("a\nb", limit: 100) == "a\\u{A}b")
        #expect(PromptText.displayed("a\\u{A}b", limit: 100) == "a\\\\u{A}b")
        #expect(PromptText.displayed("x\u{2028}y", limit: 100) == "x\\u{2028}y")
    }

    /// In a verified text (a path, a team), what shows as nothing or as another space is escaped too; a reason keeps
    /// its joiners (emoji) and no-break spaces.
    @Test func aVerifiedTextShowsEveryCharacterItHolds() {
        let path = "/usr/bin/su\u{200B}do\u{FEFF}\u{A0}x\u{AD}"
        #expect(
            PromptText.displayed(path, limit: 200, verified: true) == "/usr/bin/su\\u{200B}do\\u{FEFF}\\u{A0}x\\u{AD}")
        #expect(PromptText.displayed("👩‍💻 prix\u{A0}3", limit: 200) == "👩‍💻 prix\u{A0}3")
    }

    /// The cap counts what is shown, escapes included, and marks a cut.
    @Test func aLongTextIsCutAndMarked() {
        #expect(PromptText.displayed(String(repeating: "a", count: 10), limit: 4) == "aaaa\u{2026}")
        #expect(PromptText.displayed("ab\ncd", limit: 4) == "ab\u{2026}")
        #expect(PromptText.displayed("abcd", limit: 4) == "abcd")
    }
}
