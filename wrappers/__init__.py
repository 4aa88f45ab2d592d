"""Gymnasium wrappers that carry a teacher with the environment.

:class:`HindsightTeacher` adds the hindsight teacher's action for the current state to ``info["teacher_action"]``
at reset and at every step; :class:`HindsightTeacherVector` does the same for the native batched ``PMWeek-v0``;
:class:`TeacherPolicy` plays (or records, or clones) the teacher through the policy protocol.
"""

from .teacher import TEACHER_KEY, HindsightTeacher, HindsightTeacherVector, TeacherPolicy

__all__ = ["TEACHER_KEY", "HindsightTeacher", "HindsightTeacherVector", "TeacherPolicy"]
