import Foundation
import SecureCrypto
import SecurityProtocol

/// An enrolled print: its description and its template (`fp_print_serialize` output), which is biometric data
/// and therefore kept in zeroizing memory.
package struct EnrolledPrint: Sendable {
    /// What the print is.
    package var info: EnrolledPrintInfo
    /// The libfprint template, `fp_print_serialize` output.
    package var template: SecureBytes

    /// Pairs a description with its template.
    package init(info: EnrolledPrintInfo, template: SecureBytes) {
        self.info = info
        self.template = template
    }
}
