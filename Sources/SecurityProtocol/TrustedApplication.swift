import Foundation
import SecureCrypto

/// One program a keychain item trusts (macOS's `SecTrustedApplication`): it uses the item without being asked.
///
/// A program is trusted by its code: the SHA-256 of its executable. The application identifier (from the app
/// registry; `unregistered.<sha256>` for a program without a registration) and the path say who it was, so that
/// the same app with other code is recognised as that app changed ("<app> has changed") rather than a stranger.
package struct TrustedApplication: Sendable, Hashable {
    /// The registered `application-identifier`, or `unregistered.<sha256 hex>`; empty in a request until the engine
    /// names it (a client cannot know another program's registration).
    package var applicationIdentifier: String
    /// The executable's canonical path when it was trusted.
    package var executable: String
    /// The SHA-256 of the executable's contents when it was trusted (32 bytes; empty for ``caller``).
    package var codeDigest: Data

    package init(applicationIdentifier: String, executable: String, codeDigest: Data) {
        self.applicationIdentifier = applicationIdentifier
        self.executable = executable
        self.codeDigest = codeDigest
    }

    /// The application identifier (and private access group) of a program with no registration:
    /// `unregistered.<SHA-256 of its executable, hex>`.
    package static func unregisteredIdentifier(_ digest: Data) -> String {
        // Not String(format:) per byte: this runs on every request of an unregistered program with a trusted list.
        let digits = Array("0123456789abcdef".utf8)
        var text = Array("unregistered.".utf8)
        text.reserveCapacity(text.count + digest.count * 2)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Whether an application identifier names a registered app (not an unregistered program's private one).
    package static func isRegistered(_ applicationIdentifier: String) -> Bool {
        !applicationIdentifier.isEmpty && !applicationIdentifier.hasPrefix("unregistered.")
    }

    /// Whether this entry stands for "the calling program" (Apple's `SecTrustedApplicationCreateFromPath(NULL)`),
    /// which the engine replaces with the caller it identified.
    package var isCaller: Bool { codeDigest.isEmpty }

    /// The calling program, as a request names it before the engine identifies it.
    package static let caller = TrustedApplication(applicationIdentifier: "", executable: "", codeDigest: Data())

    /// Whether `other` is this program with other code: the same registered app, or the same path.
    package func isChangedVersion(of other: TrustedApplication) -> Bool {
        guard codeDigest != other.codeDigest else { return false }
        if Self.isRegistered(applicationIdentifier) { return applicationIdentifier == other.applicationIdentifier }
        return executable == other.executable
    }

    /// The executable at `path`, named by its canonical path (symbolic links resolved), with the SHA-256 of what
    /// opening `path` reads (for `/proc/self/exe`, the running program's code); no application identifier yet.
    /// Nil when it cannot be read.
    package static func reading(_ path: String) -> TrustedApplication? {
        let canonical = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let file = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? file.close() }
        var hash = SHA256()
        do {
            while let chunk = try file.read(upToCount: 1 << 20), !chunk.isEmpty { hash.update(chunk) }
        } catch {
            return nil
        }
        return TrustedApplication(applicationIdentifier: "", executable: canonical, codeDigest: hash.finalize())
    }

    /// How a prompt names the program: its application identifier when registered, else its path.
    package var displayName: String {
        Self.isRegistered(applicationIdentifier) ? applicationIdentifier : executable
    }
}

/// An item's trusted-application list (macOS's `SecAccess`, `kSecAttrAccess`): a description and the programs that
/// use the item without being asked. Every other program that holds the item's access group is asked, through its
/// presenter, and must then prove the user is present (fingerprint or passcode, checked by the engine).
///
/// An empty list trusts no program: every use asks.
package struct ItemAccess: Sendable, Hashable {
    /// Apple's `descriptor`: the name shown for the item when its label is empty.
    package var descriptor: String
    /// The trusted programs.
    package var applications: [TrustedApplication]

    package init(descriptor: String, applications: [TrustedApplication]) {
        self.descriptor = descriptor
        self.applications = applications
    }

    /// The most programs one list holds.
    package static let maximumApplications = 64

    /// Whether `program` runs code the list trusts.
    package func trusts(_ program: TrustedApplication) -> Bool {
        applications.contains { $0.codeDigest == program.codeDigest }
    }

    /// The entry `program` is a changed version of, if any.
    package func earlierVersion(of program: TrustedApplication) -> TrustedApplication? {
        applications.first { $0.isChangedVersion(of: program) }
    }

    /// This list with `program` trusted, replacing an entry for an earlier version of it.
    package func trusting(_ program: TrustedApplication) -> ItemAccess {
        var access = self
        access.applications.removeAll { $0.codeDigest == program.codeDigest || $0.isChangedVersion(of: program) }
        access.applications.append(program)
        return access
    }
}

/// What the engine asks a program's presenter before that program uses an item whose list does not trust it.
package struct TrustPrompt: Sendable, Equatable {
    /// The asking program, as ``TrustedApplication/displayName`` names it.
    package var application: String
    /// The item: its label, else its service or account, else the list's descriptor.
    package var item: String
    /// Whether the program is on the list with other code ("<app> has changed").
    package var changed: Bool

    package init(application: String, item: String, changed: Bool) {
        self.application = application
        self.item = item
        self.changed = changed
    }

    /// The question: "<app> wants to use the item <item>", or "<app> has changed" and what it wants.
    package var text: String {
        changed
            ? "\(application) has changed since it was allowed to use the item \(item)."
                + " Allow the new version to use it?"
            : "\(application) wants to use the item \(item)."
    }
}

/// The answer to a ``TrustPrompt``. Either allow is followed by an authentication the engine checks itself.
package enum TrustChoice: UInt8, Sendable, Equatable, CaseIterable {
    /// Refuse (`errSecAuthFailed`).
    case deny = 1
    /// Allow this request only.
    case allowOnce = 2
    /// Allow, and add the program to the item's list.
    case alwaysAllow = 3
}

extension TrustedApplication: ProtocolCodable {
    /// A record: 1 application identifier, 2 executable, 3 code digest.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, applicationIdentifier)
        writer.field(2, executable)
        writer.field(3, codeDigest)
    }

    /// - Throws: ``MessageDecodingError``; `invalidValue` for a digest that is neither 32 bytes nor empty.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        self.init(
            applicationIdentifier: try reader.field(1), executable: try reader.field(2), codeDigest: try reader.field(3)
        )
        guard codeDigest.count == 32 || codeDigest.isEmpty else {
            throw MessageDecodingError(.invalidValue, at: start, "a code digest is 32 bytes")
        }
    }
}

extension ItemAccess: ProtocolCodable {
    /// A record: 1 descriptor, 2 applications.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, descriptor)
        writer.field(2, applications)
    }

    /// - Throws: ``MessageDecodingError``; `invalidValue` for more than ``maximumApplications`` programs.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        self.init(descriptor: try reader.field(1), applications: try reader.field(2))
        guard applications.count <= Self.maximumApplications else {
            throw MessageDecodingError(.invalidValue, at: start, "too many trusted applications")
        }
    }
}

extension TrustPrompt: ProtocolCodable {
    /// A record: 1 application, 2 item, 3 changed.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, application)
        writer.field(2, item)
        writer.field(3, changed)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(application: try reader.field(1), item: try reader.field(2), changed: try reader.field(3))
    }
}

extension TrustChoice: ProtocolCodable {
    /// One byte: 1 deny, 2 allow once, 3 always allow.
    package func encode(into writer: inout MessageWriter) {
        writer.byte(rawValue)
    }

    /// - Throws: `invalidValue` for any other byte.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        guard let choice = TrustChoice(rawValue: try reader.remainingByte(for: "a trust choice")) else {
            throw MessageDecodingError(.invalidValue, at: start, "unknown trust choice")
        }
        self = choice
    }
}
