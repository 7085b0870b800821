import Foundation

/// One registered application: a file under `<config-directory>/apps.d/`, in the format
///
///     # apps.d/com.example.notes.conf
///     application-identifier = ABCDE12345.com.example.notes
///     executable = /usr/bin/notes
///     sha256 = 3f7a…            (64 hex digits; repeat the line for each build you accept)
///     keychain-access-groups = ABCDE12345.com.example.shared, ABCDE12345.com.example.notes
///     administrative = no
///
/// One `key = value` per line; blank lines and lines starting with `#` are ignored. `application-identifier` is
/// required (`TEAMID.reverse.dns`: the team identifier is letters and digits), and at least one of `executable`
/// (an absolute path, compared with the canonical path of the running program) and `sha256` (the executable's
/// digest). Every access group must start with the team identifier and a dot, as Apple's do, so only one
/// developer's apps share a group. The team `unregistered` is reserved for the private groups of programs that have
/// no file.
package struct AppRegistration: Sendable, Hashable {
    /// `TEAMID.reverse.dns`.
    package var applicationIdentifier: String
    /// The canonical path the program runs from; nil = any path (then `digests` names it).
    package var executable: String?
    /// The executables accepted, by SHA-256; empty = any content at `executable`.
    package var digests: [Data]
    /// `keychain-access-groups`, in order: the first is where items go when a request names none.
    package var keychainAccessGroups: [String]
    /// An administrative tool (`lactl`): it may act in every access group of the user it runs as.
    package var isAdministrative: Bool
    /// `interpreter = yes`: the administrator knows `executable` runs scripts, and that every script it runs is
    /// this app (a script's process runs the interpreter: the kernel knows no other executable for it). Without
    /// it, a registration whose executable is a known interpreter (``isInterpreter(_:)``) is refused.
    package var isInterpreter: Bool
    /// `application-groups`: app groups (`group.com.example.shared`), as Apple's application-groups entitlement
    /// declares them; each is one of the app's access groups. Within one registry an app group belongs to one team
    /// (``AppRegistry`` leaves out a file that claims another team's).
    package var applicationGroups: [String]
    /// `own-prompts = yes`: the program draws its own prompts (its presenter) even while its user's prompt agent
    /// runs, and so sees the passcode typed into them; without it, the agent draws them when one is registered.
    package var drawsOwnPrompts: Bool

    package init(
        applicationIdentifier: String, executable: String?, digests: [Data] = [], keychainAccessGroups: [String] = [],
        isAdministrative: Bool = false, isInterpreter: Bool = false, drawsOwnPrompts: Bool = false,
        applicationGroups: [String] = []
    ) {
        self.applicationGroups = applicationGroups
        self.applicationIdentifier = applicationIdentifier
        self.executable = executable
        self.digests = digests
        self.keychainAccessGroups = keychainAccessGroups
        self.isAdministrative = isAdministrative
        self.isInterpreter = isInterpreter
        self.drawsOwnPrompts = drawsOwnPrompts
    }

    /// Whether the program at `path` is, by its name, an interpreter of scripts or a launcher of other code
    /// (`python3`, `python3.11`, `perl`, `node`, `bash`, `java`, …): registering it would give its identity to every
    /// script it runs.
    package static func isInterpreter(_ path: String) -> Bool {
        var name = Substring(path.split(separator: "/").last ?? "")
        // python3.11, perl5.36.0, lua5.4, tclsh8.6, php8.2, ruby3.1, guile-3.0, pypy3
        while let last = name.last, last.isNumber || last == "." || last == "-" { name = name.dropLast() }
        return interpreterNames.contains(String(name))
    }

    static let interpreterNames: Set<String> = [
        "python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "deno", "bun", "php", "lua", "luajit", "tclsh",
        "wish", "expect", "guile", "Rscript", "R", "julia", "java", "jshell", "swift", "swift-frontend", "pwsh",
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "awk", "gawk", "mawk", "sed",
        "env", "gjs", "osascript", "qemu",
    ]

    /// The team identifier: what `applicationIdentifier` starts with, up to the first dot.
    package var teamIdentifier: Substring {
        applicationIdentifier.prefix { $0 != "." }
    }

    /// The groups the app holds, as Apple derives them: its `keychain-access-groups`, then its application
    /// identifier (every app may use a group named after itself).
    package var accessGroups: [String] {
        // Apple's order: keychain-access-groups, the application identifier, then the app groups.
        let own =
            keychainAccessGroups.contains(applicationIdentifier)
            ? keychainAccessGroups : keychainAccessGroups + [applicationIdentifier]
        return own + applicationGroups.filter { !own.contains($0) }
    }

    /// The team the application identifier names (`ABCDE12345` of `ABCDE12345.com.example.notes`).
    package var team: String { Self.team(of: applicationIdentifier) }

    /// Whether `name` is an app group identifier: `group.` and a reverse-DNS name.
    package static func isApplicationGroup(_ name: String) -> Bool {
        guard name.hasPrefix("group."), name.count > "group.".count, name.utf8.count <= 255 else { return false }
        return name.dropFirst("group.".count).allSatisfy {
            $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_")
        }
    }

    /// Whether a program at canonical path `path` with executable digest `digest` is this app; `isFile` tells
    /// whether the registered path names the program's very file (device and inode, as the daemon sees it).
    package func matches(path: String, isFile: (String) -> Bool = { _ in true }, digest: () -> Data?) -> Bool {
        if let executable, executable != path || !isFile(executable) { return false }
        if digests.isEmpty { return true }
        guard let digest = digest() else { return false }
        return digests.contains(digest)
    }

    /// The longest registration file read, and the longest line.
    package static let maximumFileByteCount = 64 * 1024
    package static let maximumLineByteCount = 4_096
    /// The team identifier no file may use: the private groups of unregistered programs are `unregistered.<sha256>`.
    package static let reservedTeam = "unregistered"

    /// Parses the contents of registration file `file` (named in every error).
    ///
    /// - Throws: ``RegistrationError`` naming the file and the line at fault.
    package init(parsing text: String, file: String) throws(RegistrationError) {
        func fail(_ line: Int, _ message: String) -> RegistrationError {
            RegistrationError(file: file, line: line, message: message)
        }
        guard text.utf8.count <= Self.maximumFileByteCount else {
            throw fail(0, "the file is longer than \(Self.maximumFileByteCount) bytes")
        }
        var seen: [String: Int] = [:]
        var identifier: String?
        var executable: String?
        var digests: [Data] = []
        var groups: [(String, line: Int)] = []
        var administrative = false
        var interpreter = false
        var ownPrompts = false
        var appGroups: [String] = []
        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let number = index + 1
            guard rawLine.utf8.count <= Self.maximumLineByteCount else {
                throw fail(number, "the line is longer than \(Self.maximumLineByteCount) bytes")
            }
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw fail(number, "expected `key = value`, found \(Self.quoted(line))")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if key != "sha256", let first = seen[key] {
                throw fail(number, "\(Self.quoted(key)) is given twice (first on line \(first))")
            }
            seen[key] = seen[key] ?? number
            guard !value.isEmpty else { throw fail(number, "\(Self.quoted(key)) has no value") }
            guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw fail(number, "the value of \(Self.quoted(key)) contains a control character")
            }
            switch key {
            case "application-identifier":
                guard Self.isApplicationIdentifier(value) else {
                    throw fail(
                        number,
                        "application-identifier must be TEAMID.reverse.dns (a team of letters and digits, then a dot "
                            + "and a name of letters, digits, dots, hyphens and underscores), found \(Self.quoted(value))"
                    )
                }
                guard Self.team(of: value) != Self.reservedTeam else {
                    throw fail(number, "the team \(Self.reservedTeam) is reserved for unregistered programs")
                }
                identifier = value
            case "executable":
                guard value.hasPrefix("/"), (value as NSString).standardizingPath == value, !value.hasSuffix("/")
                else {
                    throw fail(
                        number, "executable must be an absolute path without . or .. parts, found \(Self.quoted(value))"
                    )
                }
                executable = value
            case "sha256":
                guard let digest = Self.digest(hex: value) else {
                    throw fail(number, "sha256 must be 64 hexadecimal digits, found \(Self.quoted(value))")
                }
                digests.append(digest)
            case "keychain-access-groups":
                for group in value.split(separator: ",", omittingEmptySubsequences: false) {
                    let group = group.trimmingCharacters(in: .whitespaces)
                    guard !group.isEmpty, !group.contains(where: \.isWhitespace) else {
                        throw fail(
                            number,
                            "keychain-access-groups must be names separated by commas, found \(Self.quoted(value))")
                    }
                    groups.append((group, number))
                }
            case "administrative":
                switch value {
                case "yes", "true": administrative = true
                case "no", "false": administrative = false
                default: throw fail(number, "administrative must be yes or no, found \(Self.quoted(value))")
                }
            case "interpreter":
                switch value {
                case "yes", "true": interpreter = true
                case "no", "false": interpreter = false
                default: throw fail(number, "interpreter must be yes or no, found \(Self.quoted(value))")
                }
            case "application-groups":
                for group in value.split(separator: ",", omittingEmptySubsequences: false) {
                    let group = group.trimmingCharacters(in: .whitespaces)
                    guard Self.isApplicationGroup(group) else {
                        throw fail(
                            number,
                            "application-groups must be app group identifiers (group. and a reverse-DNS name) "
                                + "separated by commas, found \(Self.quoted(group))")
                    }
                    if !appGroups.contains(group) { appGroups.append(group) }
                }
            case "own-prompts":
                switch value {
                case "yes", "true": ownPrompts = true
                case "no", "false": ownPrompts = false
                default: throw fail(number, "own-prompts must be yes or no, found \(Self.quoted(value))")
                }
            default:
                throw fail(
                    number,
                    "unknown key \(Self.quoted(key)) (known: application-identifier, executable, sha256, "
                        + "keychain-access-groups, application-groups, administrative, interpreter, own-prompts)")
            }
        }
        guard let identifier else { throw fail(0, "application-identifier is missing") }
        guard executable != nil || !digests.isEmpty else {
            throw fail(0, "the file names no program: give executable, sha256, or both")
        }
        if let executable, Self.isInterpreter(executable), !interpreter {
            throw fail(
                seen["executable"] ?? 0,
                "\(executable) runs scripts: registered, every script it runs would be this app; add "
                    + "`interpreter = yes` if that is meant")
        }
        let team = Self.team(of: identifier)
        for (group, number) in groups where !group.hasPrefix(team + ".") || group.count == team.count + 1 {
            throw fail(number, "the access group \(Self.quoted(group)) does not start with the team prefix \(team).")
        }
        self.init(
            applicationIdentifier: identifier, executable: executable, digests: digests,
            keychainAccessGroups: groups.map(\.0).reduce(into: []) { if !$0.contains($1) { $0.append($1) } },
            isAdministrative: administrative, isInterpreter: interpreter, drawsOwnPrompts: ownPrompts,
            applicationGroups: appGroups)
    }

    /// The file's text, in the format ``init(parsing:file:)`` reads.
    package var fileContents: String {
        var lines = ["application-identifier = \(applicationIdentifier)"]
        if let executable { lines.append("executable = \(executable)") }
        for digest in digests { lines.append("sha256 = \(Self.hex(digest))") }
        if !keychainAccessGroups.isEmpty {
            lines.append("keychain-access-groups = \(keychainAccessGroups.joined(separator: ", "))")
        }
        if !applicationGroups.isEmpty {
            lines.append("application-groups = \(applicationGroups.joined(separator: ", "))")
        }
        lines.append("administrative = \(isAdministrative ? "yes" : "no")")
        if isInterpreter { lines.append("interpreter = yes") }
        if drawsOwnPrompts { lines.append("own-prompts = yes") }
        return lines.joined(separator: "\n") + "\n"
    }

    package static func isApplicationIdentifier(_ value: String) -> Bool {
        let team = team(of: value)
        guard !team.isEmpty, team.count <= 64, team.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }),
            value.count > team.count + 1, value.count <= 255
        else { return false }
        return value.dropFirst(team.count + 1).allSatisfy {
            $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_")
        }
    }

    package static func team(of identifier: String) -> String {
        String(identifier.prefix { $0 != "." })
    }

    package static func digest(hex: String) -> Data? {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return nil }
        var bytes = Data(capacity: 32)
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    package static func hex(_ data: Data) -> String {
        data.map { String(format: "%02x", $0) }.joined()
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// `text` in quotes, cut at 80 characters, for an error message.
    private static func quoted(_ text: some StringProtocol) -> String {
        text.count > 80 ? "\"\(text.prefix(80))…\"" : "\"\(text)\""
    }
}

/// A registration file that cannot be used: which file, which line (0 = the file as a whole), and why.
package struct RegistrationError: Error, Hashable, CustomStringConvertible {
    package var file: String
    package var line: Int
    package var message: String

    package init(file: String, line: Int, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    package var description: String {
        line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)"
    }
}
