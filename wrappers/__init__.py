"""Gymnasium wrappers that carry a teacher with the environment.

:class:`HindsightTeacher` adds the hindsight teacher's action for the current state to ``info["teacher_action"]``
at reset and at every step; :class:`HindsightTeacherVector` does the same for the native batched ``PMWeek-v0``;
:class:`TeacherPolicy` plays (or records, or clones) the teacher through the policy protocol; :class:`OnlineTeacher`
adds the online planner's action instead (``PMWeek-v0``: it decides from what the agent has seen only).
"""

from .online_teacher import P_RESOLVE_KEY, OnlineTeacher
from .teacher import TEACHER_KEY, HindsightTeacher, HindsightTeacherVector, TeacherPolicy

__all__ = ["P_RESOLVE_KEY", "TEACHER_KEY", "HindsightTeacher", "HindsightTeacherVector", "OnlineTeacher",
           "TeacherPolicy"]
