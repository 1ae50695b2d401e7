/**
 * Admission and conversion webhooks (controller-runtime's pkg/webhook): the server, the builder, the review types,
 * the JSON patch of a defaulter's result. See docs/webhooks.md.
 */
export {
  WebhookServer, defaultWebhookBindAddress, defaultWebhookCertDir, defaultMaxRequestBytes, defaultMaxRequestsInFlight,
  defaultMaxInFlightBytes, defaultMaxConnections, defaultRequestTimeoutMs, type WebhookServerOptions,
  type WebhookRegistrar,
} from './server.ts';
export { WebhookBuilder } from './builder.ts';
export {
  denied, isDenied, Denied, BadRequestError, parseAdmissionReview, admissionReviewResponse, validatingHandler,
  mutatingHandler, admissionApiVersion, type AdmissionContext, type AdmissionHandler, type AdmissionRequest,
  type AdmissionResponse, type AdmissionReview, type AdmissionStatus, type Defaulter, type GroupVersionKind,
  type GroupVersionResource, type HandlerContext, type Operation, type ValidationResult, type Validator,
} from './admission.ts';
export {
  convertReview, parseConversionReview, conversionReviewResponse, conversionApiVersion, type Conversion,
  type ConversionRequest, type ConversionResponse, type ConversionReview, type SpokeConversion,
} from './conversion.ts';
export { jsonPatch, escapePointerSegment } from './jsonpatch.ts';
export { mutatePath, validatePath, convertPath, type GroupVersionKindLike } from './paths.ts';
export {
  webhookMetricFamilies, webhookLatencyBuckets, webhookRefusalReasons, type WebhookMetricFamilies, type WebhookRefusalReason,
} from './metrics.ts';
