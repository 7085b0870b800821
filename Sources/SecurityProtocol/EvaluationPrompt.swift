/// What the user is asked to do during one evaluation, for the presenter to show.
package struct EvaluationPrompt: Sendable, Equatable {
    /// Why the app asks (`localizedReason`).
    package var reason: String
    /// The fallback button's title; nil = the default ("Enter Password"), "" = no fallback offered.
    package var fallbackTitle: String?
    /// The cancel button's title; nil or "" = "Cancel".
    package var cancelTitle: String?

    /// A prompt with these texts.
    package init(reason: String, fallbackTitle: String? = nil, cancelTitle: String? = nil) {
        self.reason = reason
        self.fallbackTitle = fallbackTitle
        self.cancelTitle = cancelTitle
    }

    /// Whether a fallback to the passcode is offered (a fallback title other than "").
    package var offersFallback: Bool { fallbackTitle != "" }

    /// This prompt, with `reason` when its own is empty.
    package func withDefaultReason(_ reason: String) -> EvaluationPrompt {
        var prompt = self
        if prompt.reason.isEmpty { prompt.reason = reason }
        return prompt
    }
}

extension EvaluationPrompt: ProtocolCodable {
    /// A record: 1 reason, then the optional 2 fallbackTitle, 3 cancelTitle.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, reason)
        writer.optionalField(2, fallbackTitle)
        writer.optionalField(3, cancelTitle)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            reason: try reader.field(1), fallbackTitle: try reader.optionalField(2),
            cancelTitle: try reader.optionalField(3))
    }
}
