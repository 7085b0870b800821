import AppRegistry
import Foundation

// A libFuzzer target over the app registry's parser (`make fuzz`): any bytes must parse or be refused with a
// RegistrationError naming the file and a line of the input, never crash; a parsed registration must keep the
// parser's promises (groups under the team prefix, a program named) and read back equal from the file it writes.

func appRegistrationFuzz(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    let lineCount = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).count
    do {
        let registration = try AppRegistration(parsing: text, file: "fuzz.conf")
        precondition(registration.executable != nil || !registration.digests.isEmpty, "a registration names no program")
        let prefix = registration.teamIdentifier + "."
        precondition(registration.keychainAccessGroups.allSatisfy { $0.hasPrefix(prefix) }, "a group outside the team")
        precondition(registration.teamIdentifier != AppRegistration.reservedTeam, "the reserved team was accepted")
        let again = try AppRegistration(parsing: registration.fileContents, file: "fuzz.conf")
        precondition(again == registration, "a registration reads back differently from the file it writes")
    } catch {
        precondition(
            error.file == "fuzz.conf" && error.line >= 0 && error.line <= lineCount,
            "an error names no line of the input")
    }
}
